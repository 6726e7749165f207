"""The foreground daemon process: take the lock, check state, run the actors."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import trio

from crosstalk.cli.output import Output
from crosstalk.daemon.lock import try_acquire
from crosstalk.daemon.start import run_daemon
from crosstalk.logs import configure_daemon_logging
from crosstalk.paths import Home, heartbeat_from_env
from crosstalk.store import check_state_files

if TYPE_CHECKING:  # the features are imported once the control socket answers (daemon/start.py)
    from crosstalk.features.feature import Feature


def run_foreground(
    home: Home, out: Output, *, detach: bool, features: Sequence[Feature] | None = None
) -> None:
    """Run until stopped; a second daemon on the same home says so and returns (exit 0).

    ``features`` is :data:`~crosstalk.features.registry.FEATURES` (None) but for a test that runs
    the daemon with one more (the worked example in docs/architecture.md)."""
    home.check_socket_path()
    home.ensure()
    lock = try_acquire(home.lock)
    if isinstance(lock, int):
        pid = lock
        out.emit({"running": True, "pid": pid, "already": True}, f"already running as pid {pid}")
        return
    try:
        check_state_files(home)  # refuse damaged state before writing anything else
        configure_daemon_logging(home.log)

        def ready() -> None:
            out.emit({"running": True, "pid": os.getpid()}, f"daemon up (pid {os.getpid()})")
            if detach:
                _detach_stdio()

        trio.run(
            lambda: run_daemon(
                home, heartbeat=heartbeat_from_env(), features=features, on_ready=ready
            )
        )
    finally:
        lock.release()


def _detach_stdio() -> None:
    # The starter has read our ready line and closed its pipes; from here on we speak only
    # through daemon.log, so writes to a closed pipe can never kill us.
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
