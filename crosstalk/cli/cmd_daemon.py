"""`crosstalk daemon run|start|stop|restart|status`."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors
from crosstalk.client import daemon_pid, start_daemon
from crosstalk.errors import DaemonUnreachable
from crosstalk.paths import Home

app = typer.Typer(help="Run, start, stop or check the background daemon.", no_args_is_help=True)

STOP_TIMEOUT = 15.0


@app.command("run")
@reports_errors
def run(
    json_output: JsonOption = False,
    home: HomeOption = None,
    detach: Annotated[bool, typer.Option("--detach", hidden=True)] = False,
) -> None:
    """Run the daemon in the foreground."""
    from crosstalk.cli.daemon_main import run_foreground  # heavy imports only here

    run_foreground(Home.resolve(home), Output(json_mode=json_output), detach=detach)


@app.command("start")
@reports_errors
def start(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Start the daemon in the background and wait until it answers."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    pid = daemon_pid(h)
    if pid is not None:
        out.emit({"running": True, "pid": pid, "already": True}, f"already running as pid {pid}")
        return
    reply = start_daemon(h)
    if reply.get("already"):
        out.emit(reply, f"already running as pid {reply['pid']}")
    else:
        out.emit(reply, f"daemon up (pid {reply['pid']})")


@app.command("stop")
@reports_errors
def stop(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Stop the daemon (SIGTERM) and wait until it has let go of the home."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    pid = daemon_pid(h)
    if pid is None:
        out.emit({"stopped": False, "running": False}, "the daemon is not running")
        return
    _stop_and_wait(h, pid)
    out.emit({"stopped": True, "pid": pid}, f"daemon stopped (pid {pid})")


def _stop_and_wait(h: Home, pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + STOP_TIMEOUT
    # Done when the lock is free and the process itself has gone (it releases the lock a
    # moment before the interpreter exits).
    while daemon_pid(h) is not None or _alive(pid):
        if time.monotonic() > deadline:
            raise DaemonUnreachable(
                f"The daemon (pid {pid}) did not stop within {STOP_TIMEOUT:.0f} s; "
                f"`kill -9 {pid}` is safe, nothing acknowledged is lost."
            )
        time.sleep(0.05)


@app.command("restart")
@reports_errors
def restart(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Stop the daemon if it runs, then start it again and wait until it answers."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    old = daemon_pid(h)
    if old is not None:
        _stop_and_wait(h, old)
    reply = start_daemon(h)
    out.emit({**reply, "restarted": old is not None, "was": old},
             f"daemon up (pid {reply['pid']})")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie answers kill(0) too; it has exited
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@app.command("status")
@reports_errors
def status(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Say whether the daemon runs, and its pid."""
    out = Output(json_mode=json_output)
    pid = daemon_pid(Home.resolve(home))
    human = f"running as pid {pid}" if pid else "not running"
    out.emit({"running": pid is not None, "pid": pid}, human)
    sys.stdout.flush()
