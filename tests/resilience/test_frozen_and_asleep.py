"""Scenarios 3 and 4: a frozen socket (the proxy forwards nothing and keeps both sockets open) and
a sleeping laptop (the daemon SIGSTOPped, then SIGCONT). Also the heartbeat floor the link needs.

Which mechanism acts on a frozen socket depends on the heartbeat: the link pings every 2 s and
gives a ping 2 s to answer (``LinkTimings``), so at the default 5 s heartbeat the ping timeout ends
the connection (at most 4 s after the last pong) before the watchdog would (5 s after the last
beat), and the link reconnects inside the same actor instance. The test records both: the time to
the reconnect attempt and the relay link's restart count.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import pair, wait_until
from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import (
    HEARTBEAT,
    Peer,
    ProxyProcess,
    Tally,
    drain_reads,
    link_connected,
)


def test_frozen_socket_reconnects_within_two_heartbeats_and_touches_nothing_else(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """Freeze ana's socket: the link is back on a new one within 2 heartbeats; reads and posts
    go on meanwhile; no other actor restarts."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd)
    tally.send_many(ben, ana, [f"held before the freeze {n}" for n in range(5)])
    wait_until(lambda: link_connected(ana), timeout=30, what="ana's link to be up")
    before = ana.restarts()
    connections = proxy.command("freeze")["connections"]
    frozen_at = time.monotonic()
    # During the outage: local reads answer, and posts are committed (`queued`).
    assert tally.read(ana) == 5
    tally.send_many(ana, ben, [f"posted during the freeze {n}" for n in range(3)])
    local_ops = time.monotonic() - frozen_at
    assert tally.states["queued"] >= 3, tally.figures()

    # The link gives up on the frozen socket and dials again; from then on the network is fine
    # (a frozen socket, not a dead relay), so the new connection must come up at once.
    wait_until(
        lambda: proxy.command("stats")["connections"] > connections,
        timeout=2 * HEARTBEAT + 5,
        what="ana's link to abandon the frozen socket and try a new one",
    )
    gave_up = time.monotonic() - frozen_at
    proxy.command("pass")
    wait_until(lambda: link_connected(ana), timeout=30, what="ana's link to be ready again")
    back = time.monotonic() - frozen_at
    tally.wait_delivered(ana, ben, timeout=30)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    after = tally.restarts["ana"]
    tally.notes.update(
        heartbeat_s=HEARTBEAT,
        gave_up_after_s=round(gave_up, 2),
        reconnected_after_s=round(back, 2),
        local_read_and_3_posts_s=round(local_ops, 2),
        mechanism="watchdog restart" if after["relay_link"] > before["relay_link"]
        else "ping timeout inside the running link",
    )
    assert back <= 2 * HEARTBEAT, tally.figures()
    siblings = {name: n for name, n in after.items() if name != "relay_link"}
    assert siblings == {name: before.get(name, 0) for name in siblings}, (before, after)
    tally.assert_clean()


def test_a_healthy_idle_link_survives_a_one_second_heartbeat(
    short_tmp: Path, relay: Relay, crowd: list[Peer]
) -> None:
    """At CROSSTALK_HEARTBEAT=1 an idle, healthy relay link is never restarted."""
    ana = Peer(short_tmp / "ana", relay.url, heartbeat=1.0)
    ben = Peer(short_tmp / "ben", relay.url, heartbeat=1.0)
    crowd.extend([ana, ben])
    pair(ana, ben)
    settle = time.monotonic() + 6.0  # six heartbeats of an idle link

    def idle_long_enough() -> bool:
        return time.monotonic() >= settle

    wait_until(idle_long_enough, timeout=10, what="six heartbeats")
    link = ana.actors()["relay_link"]
    assert (link["state"], link["restarts"]) == ("running", 0), link


# The sleeping laptop runs scaled down: a 2 s heartbeat (so the link pings every 0.5 s), and a
# relay that pings an idle connection after 4 heartbeats and drops it 4 heartbeats later. A
# 3-heartbeat nap then ends before the relay even pings, and a 12-heartbeat nap outlasts the
# relay's drop, as 15 s and 60 s naps did at the default 5 s heartbeat and 20 s relay pings.
LAPTOP_HEARTBEAT = 2.0
LAPTOP_RELAY_PING = 4 * LAPTOP_HEARTBEAT


@pytest.fixture
def pinging_relay(short_tmp: Path) -> Iterator[Relay]:
    """A relay whose pings of an idle connection come every LAPTOP_RELAY_PING seconds."""
    running = Relay(short_tmp, ping=LAPTOP_RELAY_PING)
    yield running
    running.kill(signal.SIGTERM)


@pytest.mark.parametrize("naps", [3.0, 12.0], ids=["3-heartbeats", "12-heartbeats"])
def test_a_sleeping_laptop_reconnects_and_catches_up(
    naps: float, short_tmp: Path, pinging_relay: Relay, crowd: list[Peer], tally: Tally
) -> None:
    """ana's daemon is stopped while ben writes; after SIGCONT it reconnects and gets it all."""
    relay = pinging_relay
    ana, ben = paired(short_tmp, relay.url, relay.url, crowd, heartbeat=LAPTOP_HEARTBEAT)
    pid = ana.daemon_pid()
    for n in range(5):
        tally.send(ana, ben, f"before the nap {n}")
    nap = naps * LAPTOP_HEARTBEAT
    assert (nap < 2 * LAPTOP_RELAY_PING) == (naps == 3.0)  # which side of the relay's drop
    stopped = time.monotonic()
    ana_pid = ana.daemon_pid()
    assert ana_pid is not None
    os.kill(ana_pid, signal.SIGSTOP)
    try:
        tally.send_many(ben, ana, [f"while ana sleeps {n}" for n in range(10)])
        wake = stopped + nap
        wait_until(lambda: time.monotonic() >= wake, timeout=nap + 5, what="the nap")
    finally:
        os.kill(ana_pid, signal.SIGCONT)
    woke = time.monotonic()
    tally.wait_delivered(ana, timeout=60)
    caught_up = time.monotonic() - woke
    for n in range(5):
        tally.send(ana, ben, f"after the nap {n}")
    tally.wait_delivered(ana, ben, timeout=60)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    tally.notes.update(heartbeat_s=LAPTOP_HEARTBEAT, relay_ping_s=LAPTOP_RELAY_PING,
                       nap_s=round(nap, 1), caught_up_after_wake_s=round(caught_up, 2))
    assert ana.daemon_pid() == pid  # the same daemon woke up; nothing restarted it from outside
    actors = ana.actors()
    assert all(a["state"] == "running" for a in actors.values()), actors
    # DESIGN §3: a sleeping laptop restarts the relay link and touches nothing else.
    assert {name for name, a in actors.items() if a["restarts"]} <= {"relay_link"}, actors
    tally.assert_clean()
