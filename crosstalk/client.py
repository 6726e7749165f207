"""How short-lived programs (the CLI, later the MCP server) reach the daemon.

``ensure_daemon`` starts it when nothing answers, with a bounded wait, so every command that
needs the daemon just works on a fresh machine. On a home with no identity it starts nothing
and fails ``not_set_up`` (CLI.md), unless the command is one that makes the identity (pairing,
linking a new machine): a mistyped ``--home`` must not leave a directory and a daemon behind.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from crosstalk.daemon.lock import holder_pid, is_held
from crosstalk.errors import CrosstalkError, DaemonUnreachable, NotSetUp
from crosstalk.hook import control
from crosstalk.paths import Home

START_TIMEOUT = 60.0  # a home with many rooms takes a while to open them all
REQUEST_TIMEOUT = 10.0


def daemon_pid(home: Home) -> int | None:
    """The pid of the daemon holding this home's lock, or None when none runs."""
    if not is_held(home.lock):
        return None
    return holder_pid(home.lock) or None


def call(
    home: Home, op: str, params: dict[str, Any] | None = None, *, timeout: float = REQUEST_TIMEOUT
) -> dict[str, Any]:
    """One request to a running daemon."""
    return control.request(home.socket, op, params, timeout=timeout)


def ensure_daemon(home: Home, *, needs_identity: bool = True) -> int:
    """Make sure the daemon runs and answers; start it if needed. Returns its pid.

    Args:
        home: the state directory.
        needs_identity: False for what may run on a home without one: the commands that
            create the identity (``room new``, ``room join``, ``link CODE``) and the MCP server.

    Raises:
        NotSetUp: no daemon runs, the home has no identity and ``needs_identity`` is set;
            nothing was created (no directory, no daemon).
    """
    try:
        return int(call(home, "status", timeout=2.0)["pid"])
    except DaemonUnreachable:
        pass
    if needs_identity and not home.identity.exists():
        raise NotSetUp(
            f"{home.root} has no identity yet; pair with someone first: `crosstalk room new`."
        )
    return int(start_daemon(home)["pid"])


def start_daemon(home: Home) -> dict[str, Any]:
    """Start a detached daemon and wait until it answers; return its ready line.

    If another daemon holds the home, the new one says so and exits 0; that reply (with
    ``already: true``) is returned as is.
    """
    import subprocess  # only when a daemon must be started: most calls find one running

    home.ensure()
    command = [
        sys.executable,
        "-m",
        "crosstalk",
        "daemon",
        "run",
        "--json",
        "--detach",
        "--home",
        str(home.root),
    ]
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # survives the terminal that started it
        env=os.environ.copy(),
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = _read_line(proc.stdout, deadline=time.monotonic() + START_TIMEOUT)
    if line is None:
        if proc.poll() is None:
            raise DaemonUnreachable(
                f"The daemon did not start within {START_TIMEOUT:.0f} s; see {home.log}."
            )
        raise _startup_failure(proc.stderr.read().decode(errors="replace"), home.log)
    reply = json.loads(line)
    if "error" in reply:
        error = reply["error"]
        raise CrosstalkError(str(error["message"]), code=str(error["code"]))
    proc.stdout.close()
    proc.stderr.close()
    return dict(reply)


def _read_line(stream: Any, *, deadline: float) -> bytes | None:
    import selectors

    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(left):
                return None
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                return None
            buffer += chunk
    return buffer.partition(b"\n")[0]


def _startup_failure(stderr: str, log: Path) -> CrosstalkError:
    last = stderr.strip().splitlines()[-1] if stderr.strip() else "no output"
    return DaemonUnreachable(f"The daemon exited while starting ({last}); see {log}.")
