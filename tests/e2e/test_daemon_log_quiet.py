"""What a client does wrong is not a daemon bug: a real daemon's log keeps ERROR for bugs.

A client hanging up before its reply, and a hook reporting a cwd past PATH_MAX, each used to
write an ERROR with a traceback to daemon.log (issue 36).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import Cli, start_alone

pytestmark = pytest.mark.e2e

HANG_UPS = 30


def _bad_lines(cli: Cli) -> list[dict[str, Any]]:
    """daemon.log's lines at ERROR or above, or carrying a traceback."""
    lines = [json.loads(line) for line in (cli.home / "daemon.log").read_text().splitlines()]
    return [line for line in lines if line["level"] in ("ERROR", "CRITICAL") or "exc" in line]


def test_clients_hanging_up_before_their_replies_log_no_error(cli: Cli) -> None:
    """Thirty clients send `status` and hang up: no ERROR or traceback; the daemon still answers."""
    start_alone(cli)
    for _ in range(HANG_UPS):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(cli.home / "daemon.sock"))
            sock.sendall(json.dumps({"v": 1, "op": "status", "params": {}}).encode() + b"\n")
    assert cli.json("daemon", "status")["running"] is True  # answered after all of them
    assert _bad_lines(cli) == []


@pytest.mark.parametrize("cwd", ["/" + "a" * 5000, "/" + "/".join(["b" * 250] * 40)],
                         ids=["one long name", "past PATH_MAX"])
def test_a_hook_with_a_cwd_past_path_max_logs_no_error(cli: Cli, cwd: str) -> None:
    """The real hook's events with a cwd past PATH_MAX: exit 0, no stderr, no ERROR logged."""
    start_alone(cli)
    env = {**os.environ, "CROSSTALK_HOME": str(cli.home)}
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "Stop"):
        payload = {"hook_event_name": event, "session_id": "s-long", "cwd": cwd, "prompt": "x"}
        done = subprocess.run(
            [sys.executable, "-m", "crosstalk.hook.main", "--client", "claude", event],
            input=json.dumps(payload), capture_output=True, text=True, timeout=60, env=env,
            check=False,
        )
        assert (done.returncode, done.stderr) == (0, ""), event
    assert _bad_lines(cli) == []
    sessions = cli.json("status")["sessions"]
    assert "s-long" in json.dumps(sessions)  # the hook did reach the daemon
