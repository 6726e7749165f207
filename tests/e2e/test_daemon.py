"""The daemon as a real process: one per home, lock takeover, damaged state, doctor."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Cli, pid_alive, wait_until


def test_start_then_status_and_stop(cli: Cli) -> None:
    """`daemon start` returns once the daemon answers; `status` and `stop` agree with it."""
    started = cli.json("daemon", "start")
    assert started["running"] is True and started["pid"] > 0
    assert cli.json("daemon", "status") == {"running": True, "pid": started["pid"]}
    stopped = cli.json("daemon", "stop")
    assert stopped == {"stopped": True, "pid": started["pid"]}
    assert not pid_alive(started["pid"])
    assert cli.json("daemon", "status") == {"running": False, "pid": None}


def test_second_daemon_says_already_running_and_exits_0(cli: Cli) -> None:
    """A second `daemon run` on the same home exits 0 naming the first; the first keeps serving."""
    first = cli.json("daemon", "start")["pid"]
    second = cli.json("daemon", "run")
    assert second == {"running": True, "pid": first, "already": True}
    human = cli.run("daemon", "run")
    assert human.returncode == 0 and f"already running as pid {first}" in human.stdout
    assert cli.json("doctor")["ok"] is True


def test_new_daemon_takes_over_after_kill_9(cli: Cli) -> None:
    """After `kill -9` of the daemon its lock is free and a new daemon starts on the same home."""
    first = cli.json("daemon", "start")["pid"]
    os.kill(first, signal.SIGKILL)
    wait_until(lambda: not pid_alive(first), timeout=10, what="the killed daemon to go")
    second = cli.json("daemon", "start")
    assert second["pid"] != first and "already" not in second
    assert cli.json("daemon", "status")["pid"] == second["pid"]


def test_sigterm_shuts_down_cleanly(cli: Cli) -> None:
    """SIGTERM stops the daemon with exit 0 and removes its socket."""
    pid = cli.json("daemon", "start")["pid"]
    os.kill(pid, signal.SIGTERM)
    wait_until(lambda: not pid_alive(pid), timeout=10, what="the daemon to exit")
    assert not (cli.home / "daemon.sock").exists()
    assert "daemon stopped" in (cli.home / "daemon.log").read_text()


def test_damaged_database_refuses_start_and_stays_byte_identical(cli: Cli) -> None:
    """A state.db that does not parse: damaged_state naming the file, the file untouched."""
    cli.home.mkdir(mode=0o700, parents=True)
    damaged = cli.home / "state.db"
    damaged.write_bytes(b"this is not a database\x00\xff" * 100)
    before = damaged.read_bytes()
    error = cli.json("daemon", "start", expect=1)["error"]
    assert error["code"] == "damaged_state"
    assert "state.db" in error["message"]
    assert damaged.read_bytes() == before
    refused = cli.daemon_pid()
    if refused is not None:  # it wrote its pid into the lock before checking, then exited 1
        wait_until(lambda: not pid_alive(refused), timeout=10, what="the refused daemon to exit")
    assert cli.json("daemon", "status")["running"] is False


def test_damaged_identity_refuses_start(cli: Cli) -> None:
    """An identity.json that does not parse stops the daemon from starting and is left alone."""
    cli.home.mkdir(mode=0o700, parents=True)
    damaged = cli.home / "identity.json"
    damaged.write_text('{"label": "half a file')
    error = cli.json("daemon", "run", expect=1)["error"]
    assert error["code"] == "damaged_state" and "identity.json" in error["message"]
    assert damaged.read_text() == '{"label": "half a file'


def test_doctor_lists_every_actor_and_fails_without_daemon(cli: Cli) -> None:
    """`doctor --json` exits 1 with no daemon, 0 with one, listing each actor's health."""
    down = cli.json("doctor", expect=1)
    assert down["ok"] is False
    assert any(c["name"] == "daemon" and not c["ok"] for c in down["checks"])
    cli.json("daemon", "start")
    up = cli.json("doctor")
    assert up["ok"] is True
    assert {c["name"] for c in up["checks"]} >= {
        "state_dir",
        "private_files",
        "state_files",
        "daemon",
        "actors",
    }
    names = {a["name"] for a in up["actors"]}
    assert "control" in names
    for actor in up["actors"]:
        assert actor["state"] == "running"
        assert actor["restarts"] == 0
        assert actor["beat_age_s"] >= 0
        assert set(actor) >= {"name", "state", "restarts", "last_error", "beat_age_s", "inbox"}


def test_state_directory_and_files_are_private(cli: Cli) -> None:
    """The state directory is 0700 and every file the daemon writes is 0600."""
    cli.json("daemon", "start")
    assert (cli.home.stat().st_mode & 0o777) == 0o700
    for path in cli.home.iterdir():
        assert (path.stat().st_mode & 0o077) == 0, path
    with sqlite3.connect(cli.home / "state.db") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_ten_daemons_started_at_once_leave_exactly_one(short_tmp: Path) -> None:
    """Ten `daemon run`s racing on one home: exactly one keeps running, nine exit 0."""
    home = short_tmp / "home"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "crosstalk", "daemon", "run", "--json", "--home", str(home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(10)
    ]
    try:
        wait_until(
            lambda: sum(p.poll() is not None for p in procs) >= 9,
            timeout=60,
            what="nine of the ten daemons to give up",
        )
        exited = [p for p in procs if p.poll() is not None]
        running = [p for p in procs if p.poll() is None]
        assert len(running) == 1 and len(exited) == 9
        for proc in exited:
            assert proc.returncode == 0
            assert '"already": true' in (proc.stdout.read() if proc.stdout else "")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=15)
            for stream in (proc.stdout, proc.stderr):
                if stream:
                    stream.close()
