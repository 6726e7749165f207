"""The relay link under real faults: a connection dropped mid-pairing, a relay with another key."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Person, pair, read_json_line, reap, stop_pid, wait_until
from tests.relay.process import RelayProcess
from tests.resilience.harness import ProxyProcess


@pytest.fixture
def relay(short_tmp: Path) -> Iterator[RelayProcess]:
    proc = RelayProcess(short_tmp / "relay-data", short_tmp / "relay.stderr")
    proc.start()
    yield proc
    proc.kill(signal.SIGTERM)


def test_connection_dropped_mid_pairing_recovers(short_tmp: Path, relay: RelayProcess) -> None:
    """The inviter's relay connection is reset after the code is shown; pairing still completes."""
    proxy = ProxyProcess(relay.port, short_tmp / "proxy.sock")
    ana = Person(short_tmp / "ana", f"ws://127.0.0.1:{proxy.port}")
    ben = Person(short_tmp / "ben", f"ws://127.0.0.1:{relay.port}")
    new = ana.spawn("room", "new", "--json")
    try:
        code = read_json_line(new, timeout=60)["invite"]
        before = proxy.command("reset")
        joined = ben.json("room", "join", code)
        result = read_json_line(new, timeout=60)
        assert result["them"] == joined["you"] and joined["them"] == result["you"]
        after = proxy.command("stats")
        assert after["connections"] > before["connections"]  # type: ignore[operator]
    finally:
        reap(new)
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        proxy.stop()


def test_relay_with_a_different_key_at_a_pinned_url_is_refused(short_tmp: Path) -> None:
    """A relay that comes back at the same address with another key is not talked to."""
    first = RelayProcess(short_tmp / "relay-1", short_tmp / "relay-1.stderr")
    first.start()
    url = f"ws://127.0.0.1:{first.port}"
    ana, ben = Person(short_tmp / "ana", url), Person(short_tmp / "ben", url)
    impostor = RelayProcess(
        short_tmp / "relay-2", short_tmp / "relay-2.stderr", "--port", str(first.port)
    )
    try:
        pair(ana, ben)
        first.kill()
        impostor.start()
        sent = ana.json("send", "ben", "for ben only")
        assert sent["state"] == "queued"

        def refused() -> bool:
            relay = ana.json("status")["relay"]
            return not relay["connected"] and "pinned" in str(relay.get("last_error"))

        wait_until(refused, timeout=60, what="the link to refuse the impostor's key")
        assert ben.json("read")["messages"] == []
    finally:
        impostor.kill(signal.SIGTERM)
        first.kill(signal.SIGTERM)
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
