"""A sender's own message must never come back to it as an incoming message after a reconnect.

Found by scenarios 2 and 4 (``echoed_to_sender`` in their figures): after a reconnect the relay
replays the room log past our cursor, which can include ops we sent ourselves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import wait_until
from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import Peer, ProxyProcess, Tally, link_connected


@pytest.mark.xfail(
    strict=True,
    reason="crosstalk/ops/message_ops.py hold_message holds every MessageOp the room applies, "
    "even when the verified sender is our own fingerprint; our own posts never advance our "
    "relay cursor (core/link.py advances it on inbound ops only), and on resume the relay "
    "replays every retained op past the cursor (relay/core.py _resume), ours included, so after "
    "a reconnect before every member acknowledged them our sent messages are held for us",
)
def test_a_reconnect_does_not_hand_the_sender_its_own_messages(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """ana sends while ben is away, her connection is reset, she resumes: her read stays empty."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd)
    ben.stop_daemon()  # ben cannot acknowledge, so the relay keeps ana's ops in the room log
    for n in range(3):
        tally.send(ana, ben, f"from ana {n}")
    assert tally.states == {"sent": 3}, tally.figures()
    connections = proxy.command("reset")["connections"]
    wait_until(
        lambda: proxy.command("stats")["connections"] > connections and link_connected(ana),
        timeout=30,
        what="ana's link to come back",
    )
    ben.start_daemon()
    # ben's marker is sequenced after ana's messages; the room applies in sequence order, so
    # once ana has read the marker, any replay of her own messages has been applied too.
    tally.send(ben, ana, "marker")
    tally.wait_delivered(ana, ben, timeout=30)
    assert tally.echoed == 0, tally.figures()
