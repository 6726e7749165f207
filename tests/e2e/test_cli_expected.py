"""The small commands people expect (issue 24 item 5): bare `crosstalk` is `status`,
`daemon restart`, and `relay start|stop|status` for the local relay."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli, pid_alive, stop_pid

pytestmark = pytest.mark.e2e


def test_bare_crosstalk_shows_status(cli: Cli) -> None:
    """`crosstalk --json` prints what `crosstalk status --json` prints."""
    bare = cli.json()
    assert set(bare) >= {"label", "fingerprint", "relay", "daemon", "sessions"}
    assert bare == cli.json("status")


def test_daemon_restart_replaces_a_running_daemon_and_starts_a_stopped_one(cli: Cli) -> None:
    """restart with none running starts one; with one running, a new pid takes over."""
    first = cli.json("daemon", "restart")
    assert first["running"] and first["restarted"] is False
    second = cli.json("daemon", "restart")
    assert second["restarted"] is True and second["was"] == first["pid"]
    assert second["pid"] != first["pid"] and not pid_alive(first["pid"])
    assert cli.json("daemon", "status") == {"running": True, "pid": second["pid"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_relay_start_status_stop_drive_the_local_relay(cli: Cli, short_tmp: Path) -> None:
    """start runs the local relay (once), status sees it, stop ends that process."""
    env = {"XDG_DATA_HOME": str(short_tmp / "xdg"), "CROSSTALK_LOCAL_PORT": str(_free_port())}
    started = cli.json("relay", "start", env=env)
    try:
        assert started["running"] and pid_alive(started["pid"])
        assert cli.json("relay", "start", env=env)["pid"] == started["pid"]
        status = cli.json("relay", "status", "--relay", started["url"], env=env)
        assert status == {"url": started["url"], "reachable": True}
        stopped = cli.json("relay", "stop", env=env)
        assert stopped == {"url": started["url"], "running": False, "pid": started["pid"]}
        assert not pid_alive(started["pid"])
    finally:
        stop_pid(started["pid"])
