"""Real-process helpers: run the CLI in a subprocess against a throwaway home, and stop every
daemon a test started, by its pid."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHORT_SCRATCH

CLI_TIMEOUT = 60.0


class Cli:
    """Runs ``python -m crosstalk ...`` with ``--home`` set to one state directory."""

    def __init__(self, home: Path) -> None:
        self.home = home

    def run(
        self,
        *args: str,
        timeout: float = CLI_TIMEOUT,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        full_env = {**os.environ, **(env or {})}
        full_env.pop("CROSSTALK_HOME", None)
        return subprocess.run(
            [sys.executable, "-m", "crosstalk", *args, "--home", str(self.home)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            check=False,
            cwd=cwd,
        )

    def json(self, *args: str, expect: int = 0, **kw: Any) -> dict[str, Any]:
        """Run with --json, check the exit status, return the (last) JSON line."""
        proc = self.run(*args, "--json", **kw)
        assert proc.returncode == expect, (
            proc.returncode,
            proc.stdout,
            proc.stderr,
            self.log_tail(),
        )
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert lines, (proc.stdout, proc.stderr)
        result: dict[str, Any] = json.loads(lines[-1])
        return result

    def log_tail(self, lines: int = 15) -> str:
        """The end of this home's daemon.log, for failure messages."""
        try:
            return "\n".join((self.home / "daemon.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no daemon.log)"

    def daemon_pid(self) -> int | None:
        try:
            pid = int((self.home / "daemon.lock").read_text().strip() or 0)
        except (OSError, ValueError):
            return None
        return pid or None


def start_alone(cli: Cli, label: str = "ana") -> None:
    """An identity on ``cli``'s fresh home, without pairing (enough to talk to one's own
    daemon), and its daemon running (stopped by the ``cli`` fixture)."""
    from crosstalk.store.identity import new_identity, save_identity

    cli.home.mkdir(mode=0o700)
    save_identity(cli.home / "identity.json", new_identity(label))
    assert cli.json("daemon", "start")["running"] is True


def work_in(person: Cli, project: Path, session: str = "agent-1") -> None:
    """Register an agent session working in ``project``, as its hook does on every event: the
    daemon takes file and diff slices only from its sessions' projects."""
    from crosstalk.hook.control import request

    params = {"name": session, "client": "claude", "project": str(project)}
    assert request(person.home / "daemon.sock", "session_register", params)["ok"] is True


def wait_session_known(sender: Cli, owner: str, session: str, *, timeout: float = 60.0) -> None:
    """Until ``sender``'s daemon lists ``owner``'s published session ``session`` (bounded): an
    address ``owner/session`` names only a session its owner published (unknown_session)."""
    from crosstalk.client import call
    from crosstalk.paths import Home

    def known() -> bool:
        peers = call(Home(sender.home), "peers", {}, timeout=30.0)["peers"]
        return any(s["name"] == session for p in peers if p["label"] == owner
                   for s in p["sessions"])

    wait_until(known, timeout=timeout, what=f"{owner}/{session} published to {sender.home.name}")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); look at its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: Any, *, timeout: float, what: str) -> None:
    """Poll ``condition`` until it is true, failing after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def stop_pid(pid: int) -> None:
    """Stop a process we started: SIGTERM, then SIGKILL after a bound."""
    if not pid_alive(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A temporary directory with a short path: unix socket paths are limited to 107 bytes.

    Any daemon that ended up with a home inside it (an agent's MCP server can start one in the
    agent's own HOME) is stopped by its pid before the directory goes.
    """
    path = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))
    yield path
    for lock in path.rglob("daemon.lock"):
        try:
            pid = int(lock.read_text().strip() or 0)
        except (OSError, ValueError):
            continue
        if pid and pid_alive(pid):
            stop_pid(pid)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cli(short_tmp: Path) -> Iterator[Cli]:
    """A CLI bound to a fresh home; any daemon it leaves running is stopped by pid."""
    c = Cli(short_tmp / "home")
    yield c
    pid = c.daemon_pid()
    if pid:
        stop_pid(pid)


RELAY_DATA = "relay-data"


@pytest.fixture
def relay_url(short_tmp: Path) -> Iterator[str]:
    """A real relay process on a free loopback port; stopped by pid afterwards."""
    from tests.relay.process import RelayProcess

    proc = RelayProcess(short_tmp / RELAY_DATA, short_tmp / "relay.stderr")
    proc.start()
    try:
        yield f"ws://127.0.0.1:{proc.port}"
    finally:
        proc.kill(signal.SIGTERM)


class Person(Cli):
    """A CLI whose daemon talks to the test relay."""

    def __init__(self, home: Path, relay: str) -> None:
        super().__init__(home)
        self.relay = relay
        self.relay_data = home.parent / RELAY_DATA  # where the `relay_url` fixture keeps it

    def run(
        self,
        *args: str,
        timeout: float = CLI_TIMEOUT,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return super().run(
            *args, timeout=timeout, env={"CROSSTALK_RELAY": self.relay, **(env or {})}, cwd=cwd
        )

    def spawn(self, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """Start a CLI command in the background (e.g. `room new`, which waits)."""
        env = {**os.environ, "CROSSTALK_RELAY": self.relay}
        env.pop("CROSSTALK_HOME", None)
        return subprocess.Popen(
            [sys.executable, "-m", "crosstalk", *args, "--home", str(self.home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=cwd,
        )


@pytest.fixture
def people(short_tmp: Path, relay_url: str) -> Iterator[list[Person]]:
    """Three people with their own homes on one relay; their daemons are stopped by pid."""
    crowd = [Person(short_tmp / name, relay_url) for name in ("ana", "ben", "cy")]
    yield crowd
    for person in crowd:
        pid = person.daemon_pid()
        if pid:
            stop_pid(pid)


def read_json_line(proc: subprocess.Popen[str], *, timeout: float) -> dict[str, Any]:
    """The next JSON line a background CLI printed, within ``timeout`` seconds."""
    assert proc.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            raise AssertionError(f"no output within {timeout}s")
        line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no output"
    result: dict[str, Any] = json.loads(line)
    return result


def reap(proc: subprocess.Popen[str]) -> None:
    """A child that is done with: killed if still running, waited for, its pipes closed."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def pair(
    inviter: Person, joiner: Person, *, host: bool = False, label: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pair two people through the real CLI (the joiner calling itself ``label``, its home's
    name by default); returns (inviter's result, joiner's result)."""
    extra = ("--host",) if host else ()
    new = inviter.spawn("room", "new", "--json", "--label", inviter.home.name, *extra)
    try:
        invite = read_json_line(new, timeout=60)
        assert invite["expires_in"] == 900
        joined = joiner.json("room", "join", invite["invite"], "--label",
                             joiner.home.name if label is None else label)
        result = read_json_line(new, timeout=60)
        assert new.wait(timeout=30) == 0
    finally:
        reap(new)
    return result, joined


def wait_for_messages(person: Cli, count: int, *, timeout: float = 30.0) -> list[dict[str, Any]]:
    """Read until ``count`` messages have arrived (each read marks them read); bounded."""
    got: list[dict[str, Any]] = []

    def arrived() -> bool:
        got.extend(person.json("read")["messages"])
        return len(got) >= count

    wait_until(arrived, timeout=timeout, what=f"{count} message(s) for {person.home.name}")
    return got


@contextlib.contextmanager
def daemons_with(env: dict[str, str], people: list[Person], relay_pid_file: Path) -> Iterator[None]:
    """Run with ``env`` (inherited by the daemons the CLI starts), then stop those daemons and
    the relay a daemon started for itself (its pid file), and put the environment back."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for person in people:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        if relay_pid_file.exists():
            relay_pid = int(relay_pid_file.read_text())
            if pid_alive(relay_pid):
                os.kill(relay_pid, signal.SIGTERM)
                wait_until(lambda: not pid_alive(relay_pid), timeout=15, what="a started relay")
