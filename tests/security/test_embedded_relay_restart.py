"""Daemons start the embedded relay again when it dies (finding 9).

Two people with no relay configured pair on the machine's embedded relay (on a port and data
folder of this test's own). The relay is killed by its pid; a daemon starts it again (one, by
the start lock) and both links come back. Bounded waits on conditions only.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from tests.e2e.conftest import Person, pair, pid_alive, short_tmp, stop_pid

__all__ = ["short_tmp"]


def eventually(condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def connected(person: Person) -> bool:
    try:
        status = control.request(person.home / "daemon.sock", "status", timeout=10.0)
    except CrosstalkError:
        return False
    return bool(status["relay"]["connected"])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def embedded(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """This test's own embedded relay: its port and data folder, stopped by pid afterwards."""
    port = free_port()
    monkeypatch.setenv("CROSSTALK_LOCAL_PORT", str(port))
    monkeypatch.setenv("XDG_DATA_HOME", str(short_tmp / "xdg"))
    data = short_tmp / "xdg" / "crosstalk" / "relay"
    yield data, f"ws://127.0.0.1:{port}"
    try:
        pid = int((data / "relay.pid").read_text())
    except (OSError, ValueError):
        return
    if pid_alive(pid):
        os.kill(pid, signal.SIGTERM)


def test_a_killed_embedded_relay_is_started_again(
    short_tmp: Path, embedded: tuple[Path, str]
) -> None:
    """Kill the local relay: a daemon restarts it and both links reconnect."""
    data, url = embedded
    ana, ben = Person(short_tmp / "ana", url), Person(short_tmp / "ben", url)
    try:
        pair(ana, ben)
        eventually(lambda: connected(ana) and connected(ben), "both links up")
        first = int((data / "relay.pid").read_text())
        os.kill(first, signal.SIGKILL)
        eventually(lambda: not connected(ana), "ana's link to notice")
        eventually(
            lambda: (data / "relay.pid").read_text().strip() != str(first),
            "a daemon to start the relay again",
        )
        eventually(lambda: connected(ana) and connected(ben), "both links back")
        second = int((data / "relay.pid").read_text())
        assert pid_alive(second)
    finally:
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # gone: reaped
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_the_dead_relay_is_reaped_by_the_daemon_that_started_it(
    short_tmp: Path, embedded: tuple[Path, str]
) -> None:
    """The daemon that had started the killed relay collects it (no zombie left behind), and
    both links come back. (That a link connects the moment the keeper has the relay back,
    rather than when its backoff runs out, is shown at exact virtual times in
    tests/actors/test_relay_link.py::test_retry_now_connects_at_once_instead_of_waiting_out_the_backoff.)
    """
    data, url = embedded
    ana, ben = Person(short_tmp / "ana", url), Person(short_tmp / "ben", url)
    try:
        pair(ana, ben)
        eventually(lambda: connected(ana) and connected(ben), "both links up")
        first = int((data / "relay.pid").read_text())
        os.kill(first, signal.SIGKILL)
        eventually(lambda: not connected(ana) and not connected(ben), "both links to notice")
        eventually(
            lambda: (data / "relay.pid").read_text().strip() != str(first),
            "a daemon to start the relay again",
        )
        eventually(lambda: connected(ana) and connected(ben), "both links back")
        eventually(lambda: not _zombie(first), "the dead relay to be reaped", timeout=30.0)
    finally:
        for person in (ana, ben):
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
