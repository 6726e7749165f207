"""``doctor`` tells the truth about the relay link (finding 10).

ana and ben pair on a relay we own; the relay is frozen with SIGSTOP. While the link is down
or reconnecting, ``doctor`` fails (exit 1) on the relay row; once the relay is thawed it passes
again and shows the loss, its reason and how long the link took to come back.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from tests.e2e.conftest import Person, pair, short_tmp, stop_pid
from tests.relay.process import RelayProcess

__all__ = ["short_tmp"]


def eventually(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def link(person: Person) -> dict[str, Any]:
    try:
        status = control.request(person.home / "daemon.sock", "status", timeout=10.0)
    except CrosstalkError:
        return {}
    return dict(status["relay"])


@pytest.fixture
def frozen_pair(short_tmp: Path) -> Iterator[tuple[Person, RelayProcess]]:
    relay = RelayProcess(short_tmp / "relay", short_tmp / "relay.stderr")
    relay.start()
    ana, ben = Person(short_tmp / "ana", relay.url), Person(short_tmp / "ben", relay.url)
    try:
        pair(ana, ben)
        yield ana, relay
    finally:
        if relay.proc is not None:
            os.kill(relay.proc.pid, signal.SIGCONT)
        relay.kill(signal.SIGTERM)
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)


def relay_check(report: dict[str, Any]) -> dict[str, Any]:
    (row,) = [c for c in report["checks"] if c["name"] == "relay"]
    return dict(row)


def test_doctor_fails_while_the_relay_is_frozen_and_shows_the_loss_after(
    frozen_pair: tuple[Person, RelayProcess],
) -> None:
    """SIGSTOP on the relay: doctor exits 1 naming the link's state; after SIGCONT it passes
    and reports one loss or more, the reason and the time to reconnect."""
    ana, relay = frozen_pair
    assert relay.proc is not None
    eventually(lambda: link(ana).get("connected") is True, "the link to come up")
    os.kill(relay.proc.pid, signal.SIGSTOP)
    eventually(lambda: link(ana).get("connected") is False, "the link to notice the freeze")
    down = ana.json("doctor", expect=1)
    row = relay_check(down)
    assert down["ok"] is False and row["ok"] is False
    assert row["detail"].startswith(f"not connected to {relay.url}")
    assert "lost" in row["detail"]
    os.kill(relay.proc.pid, signal.SIGCONT)
    eventually(lambda: link(ana).get("reconnect_s") is not None, "the link to come back")
    up = ana.json("doctor")
    row = relay_check(up)
    assert up["ok"] is True and row["ok"] is True
    assert "lost" in row["detail"] and "back after" in row["detail"]
    assert link(ana)["losses"] >= 1 and link(ana)["last_loss"]
