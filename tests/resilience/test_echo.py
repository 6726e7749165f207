"""A sender's own message must never come back to it as an incoming message after a reconnect.

Found by scenarios 2, 4 and 5 (``echoed_to_sender`` in their figures): after a reconnect the relay
replays the room log past our cursor, which can include ops we sent ourselves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import Peer, ProxyProcess, Tally, drain_reads


def test_a_reconnect_does_not_hand_the_sender_its_own_messages(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """ana's inbound side is cut while ben and she both post, then her link resets: after the
    resume (which replays ben's op and hers) her read holds ben's message only."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd)
    proxy.command("partition down")  # ana's posts reach the relay; nothing comes back to her
    tally.send(ben, ana, "from ben, sequenced first")
    tally.send(ana, ben, "from ana, sequenced second")
    proxy.command("reset pass")  # drop the connection; the resume replays past ana's cursor
    tally.wait_delivered(ana, ben, timeout=60)
    drain_reads(tally, ana, ben)
    assert tally.echoed == 0, tally.figures()
