"""Scenarios 1 and 2: the relay is unreachable when the daemon starts, and the relay is killed
with ``kill -9`` and restarted (same data directory, same port) while messages flow."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import pid_alive, wait_until
from tests.resilience.conftest import Relay, paired
from tests.resilience.harness import Peer, ProxyProcess, Tally, drain_reads, link_connected


def test_sends_queue_durably_while_the_relay_is_unreachable_and_flush_when_it_returns(
    short_tmp: Path,
    relay: Relay,
    proxies: Callable[[str], ProxyProcess],
    crowd: list[Peer],
    tally: Tally,
) -> None:
    """Daemon starts with the relay unreachable: sends answer `queued`, survive kill -9, flush."""
    proxy = proxies("ana")
    ana, ben = paired(short_tmp, proxy.url, relay.url, crowd)
    ana.stop_daemon()
    proxy.command("reset refuse")
    ana.start_daemon()
    assert not link_connected(ana)

    # All ten at once: each waits the send's 2 s for `sent` before answering `queued`.
    tally.send_many(ana, ben, [f"offline {n}" for n in range(10)], workers=10)
    assert tally.states == {"queued": 10}, tally.figures()
    pid = ana.daemon_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # the queue must be on disk, not in the dead daemon's memory
    wait_until(lambda: not pid_alive(pid), timeout=10, what="the killed daemon to go")
    assert ben.call("read", {})["messages"] == []

    ana.start_daemon()
    proxy.command("accept")
    tally.wait_delivered(ben, timeout=60)
    drain_reads(tally, ben)
    tally.record_restarts(ana, ben)
    tally.assert_clean()


def test_relay_kill_9_and_restart_mid_stream_loses_and_repeats_nothing(
    short_tmp: Path, relay: Relay, crowd: list[Peer], tally: Tally
) -> None:
    """kill -9 of the relay between two bursts; both bursts arrive once after it restarts."""
    ana, ben = paired(short_tmp, relay.url, relay.url, crowd)
    before = {p.name: p.restarts() for p in (ana, ben)}
    for n in range(15):
        tally.send(ana, ben, f"before {n}")
        tally.send(ben, ana, f"reply {n}")
    relay.kill()
    tally.send_many(ana, ben, [f"during {n}" for n in range(8)])
    tally.send_many(ben, ana, [f"during back {n}" for n in range(8)])
    relay.start()
    for n in range(15):
        tally.send(ana, ben, f"after {n}")
    tally.wait_delivered(ana, ben, timeout=90)
    drain_reads(tally, ana, ben)
    tally.record_restarts(ana, ben)
    tally.notes["relay_restarts"] = relay.restarts
    tally.notes["restarts_before"] = before
    tally.assert_clean()
