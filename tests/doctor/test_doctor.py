"""`crosstalk doctor`: every failing row says what is wrong and the exact command that fixes it.

Most rows are checked on a real home in a temporary directory; the daemon's rows are built from
plain values (``daemon_rows``, ``relay_row``), standing in for what a daemon answers. For the
rows whose fix is a shell command, the tests run the command the row names and check that the
row then passes.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.doctor.checks import Check
from crosstalk.doctor.report import (
    check_daemon,
    check_files_parse,
    check_state_dir,
    crosstalk_command,
    daemon_rows,
    loop_row,
    relay_row,
    run_checks,
)
from crosstalk.paths import Home
from crosstalk.store.migrations import LATEST_VERSION
from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import pid_alive, stop_pid

COMMAND = re.compile(r"`([^`]+)`")


@pytest.fixture
def home() -> Iterator[Home]:
    """A home that is not the default one, so fixes carry ``--home``; under a short /tmp path
    (a unix socket path must stay under 107 bytes). Its daemon, if any, is stopped by pid."""
    root = Path(tempfile.mkdtemp(prefix="ct-dr-", dir=SHORT_SCRATCH))
    h = Home(root / "h")
    yield h
    try:
        pid = int(h.lock.read_text().strip() or 0)
    except (OSError, ValueError):
        pid = 0
    if pid and pid_alive(pid):
        stop_pid(pid)
    shutil.rmtree(root, ignore_errors=True)


def fix_of(detail: str) -> str:
    """The last command a row names (the one that fixes it)."""
    commands: list[str] = COMMAND.findall(detail)
    assert commands, f"no command in {detail!r}"
    return commands[-1]


def run_fix(command: str) -> None:
    """Run a fix the way a person pastes it into a shell, with this interpreter's scripts first."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["sh", "-c", command], env=env, capture_output=True, text=True, timeout=90, check=False
    )
    assert done.returncode == 0, (command, done.stdout, done.stderr)


def test_a_command_names_the_home_only_when_the_shell_would_not_pick_it(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fixes carry --home for another home, and nothing extra for the one CROSSTALK_HOME names."""
    assert crosstalk_command(home, "daemon start") == f"crosstalk daemon start --home {home.root}"
    monkeypatch.setenv("CROSSTALK_HOME", str(home.root))
    assert crosstalk_command(home, "daemon start") == "crosstalk daemon start"


def test_a_missing_home_says_so_and_starting_the_daemon_fixes_it(home: Home) -> None:
    """The named `crosstalk daemon start --home …` creates the home, and the rows then pass."""
    (row,) = check_state_dir(home)
    assert not row.ok
    assert row.detail == (
        f"{home.root} does not exist yet; run `crosstalk daemon start --home {home.root}` "
        "to create it."
    )
    run_fix(fix_of(row.detail))
    assert all(r.ok for r in check_state_dir(home))
    rows, actors = check_daemon(home)
    assert [r.name for r in rows if r.ok] == ["daemon", "actors", "relay", "event_loop"] and actors


def test_a_loose_home_and_loose_files_name_the_chmod_that_fixes_them(home: Home) -> None:
    """A 0755 home and a 0644 file each get the exact chmod; running them clears both rows."""
    home.root.mkdir(mode=0o755)
    home.root.chmod(0o755)
    loose = home.root / "daemon.log"
    loose.write_text("")
    loose.chmod(0o644)
    state_dir, private = check_state_dir(home)
    assert not state_dir.ok and not private.ok
    assert state_dir.detail == (
        f"{home.root} is 755, so others can look in; run `chmod 700 {home.root}`."
    )
    assert private.detail == f"others can read daemon.log; run `chmod 600 {loose}`."
    run_fix(fix_of(state_dir.detail))
    run_fix(fix_of(private.detail))
    assert all(r.ok for r in check_state_dir(home))


def test_a_damaged_identity_names_the_file_and_the_move_that_starts_afresh(home: Home) -> None:
    """A garbage identity.json: the row names it, warns that pairing is lost, gives the `mv`."""
    home.ensure()
    home.identity.write_text("{ not json")
    (row,) = check_files_parse(home)
    assert not row.ok and "identity.json" in row.detail
    aside = f"{home.identity}.damaged"
    assert (
        f"To start afresh without it (you will need to pair again), run "
        f"`mv {home.identity} {aside}`, then `crosstalk daemon start --home {home.root}`."
    ) in row.detail
    run_fix(COMMAND.findall(row.detail)[-2])
    assert check_files_parse(home)[0].ok


def test_a_damaged_database_keeps_its_rooms_in_the_moved_file(home: Home) -> None:
    """A state.db that is not a database: the fix moves it aside and says what it holds."""
    home.ensure()
    home.database.write_bytes(b"not a database at all" * 50)
    (row,) = check_files_parse(home)
    assert not row.ok and "state.db" in row.detail
    assert "rooms, contacts and messages stay in the moved file" in row.detail
    assert f"`mv {home.database} {home.database}.damaged`" in row.detail


def test_a_database_from_a_newer_crosstalk_says_to_upgrade(home: Home) -> None:
    """A database with a newer schema is not damaged: the fix is to upgrade, not to move it."""
    home.ensure()
    conn = sqlite3.connect(home.database)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    (row,) = check_files_parse(home)
    assert not row.ok and "mv " not in row.detail
    assert row.detail.endswith(
        "Upgrade crosstalk: in your crosstalk clone, run `git pull`, then "
        "`python3 -m pip install -e .`."
    )


def test_daemon_rows_name_start_or_restart(home: Home) -> None:
    """Not running: start it. Not answering, or another pid answering: stop, then start."""
    restart = (
        f"run `crosstalk daemon stop --home {home.root}`, "
        f"then `crosstalk daemon start --home {home.root}`."
    )
    (down,) = daemon_rows(home, None, None, [])
    assert down.detail == f"not running; run `crosstalk daemon start --home {home.root}`."
    (mute,) = daemon_rows(home, 42, None, [], "The daemon did not answer in time.")
    assert mute.detail == (
        f"pid 42 holds the lock but does not answer (The daemon did not answer in time); {restart}"
    )
    (other,) = daemon_rows(home, 42, {"pid": 43}, [])
    assert other.detail == f"the lock says pid 42 but pid 43 answers the socket; {restart}"
    assert not (down.ok or mute.ok or other.ok)


def test_a_failed_actor_is_named_with_its_error_the_log_and_the_restart(home: Home) -> None:
    """The actors row names each actor not running, its last error, daemon.log and the fix."""
    actors: list[dict[str, Any]] = [
        {"name": "gate", "state": "running", "last_error": None},
        {"name": "relay_link", "state": "failed", "last_error": "OSError: boom"},
    ]
    daemon, row = daemon_rows(home, 42, {"pid": 42}, actors)
    assert daemon.ok and not row.ok
    assert row.detail == (
        f"not running: relay_link (failed: OSError: boom); the details are in {home.log}; "
        f"run `crosstalk daemon stop --home {home.root}`, "
        f"then `crosstalk daemon start --home {home.root}`."
    )


def test_the_relay_row_passes_only_while_the_link_is_up() -> None:
    """Not started or connected pass (with the link's losses); connecting or unreachable fail,
    naming the state, the reason, the losses and the probe."""
    assert relay_row({"relay": {"url": None}}).ok
    up = relay_row(
        {"relay": {"url": "ws://r:1", "connected": True, "losses": 2, "lost_ago_s": 42.0,
                   "last_loss": "no pong within 20 s", "reconnect_s": 1.5}}
    )
    assert up.ok
    assert up.detail == (
        "connected to ws://r:1; lost 2 times, last 42 s ago (no pong within 20 s), "
        "back after 1.5 s"
    )
    reconnecting = relay_row(
        {"relay": {"url": "ws://r:1", "connected": False, "state": "connecting", "attempts": 3,
                   "last_error": None, "losses": 1, "lost_ago_s": 5.0,
                   "last_loss": "no pong within 20 s"}}
    )
    assert not reconnecting.ok
    assert reconnecting.detail.startswith(
        "not connected to ws://r:1 (connecting, attempt 3: no pong within 20 s); lost 1 time, "
        "last 5 s ago (no pong within 20 s); messages wait until it is back."
    )
    assert not relay_row(
        {"relay": {"url": "ws://r:1", "connected": False, "last_error": None}}
    ).ok
    down = relay_row(
        {"relay": {"url": "ws://r:1", "connected": False, "state": "connecting",
                   "last_error": "connection refused"}}
    )
    assert not down.ok
    assert down.detail == (
        "not connected to ws://r:1 (connecting: connection refused); messages wait until it "
        "is back. Check it with `crosstalk relay status --relay ws://r:1`; start that relay, "
        "or set CROSSTALK_RELAY to the right one."
    )


def test_the_loop_row_fails_once_the_daemon_stood_still_for_a_second(home: Home) -> None:
    """The worst lag of the daemon's event loop passes under a second, with when it was; a
    longer one fails, saying for how long and when, what it cost, and which log to report."""
    never = {"loop": {"worst_lag_s": 0.0, "worst_lag_at": None, "resolution_s": 0.625}}
    assert loop_row(home, never) == loop_row(home, {}) == Check("event_loop", True, "never late")
    at = time.mktime((2026, 12, 6, 1, 2, 3, 0, 0, -1))  # local time, as the row shows it
    brief = loop_row(home, {"loop": {"worst_lag_s": 0.08, "worst_lag_at": at}})
    assert brief == Check("event_loop", True, "worst lag 80 ms, at 2026-12-06 01:02:03")
    stalled = loop_row(home, {"loop": {"worst_lag_s": 152.3, "worst_lag_at": at}})
    assert not stalled.ok
    assert stalled.detail.startswith(
        "the daemon ran nothing else for 152.3 s, at 2026-12-06 01:02:03"
    )
    assert stalled.detail.endswith(f"report it with {home.log}.")


def test_every_failing_row_of_a_fresh_home_names_a_command(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever fails on a home that was never set up says which command fixes it."""
    monkeypatch.setenv("HOME", str(home.root.parent))  # no client configs of this machine
    report = run_checks(home)
    failing = [c for c in report.checks if not c.ok]
    assert not report.ok and failing
    for row in failing:
        assert fix_of(row.detail).startswith(("crosstalk ", "chmod ", "mv ", "codex")), row
