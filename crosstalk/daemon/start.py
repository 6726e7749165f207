"""The daemon process's root task: its control socket first, then everything else behind it.

Importing the features is most of a daemon's start-up (the wire models, the relay link's
machines, the crypto and pairing libraries). So this module imports only what the control
socket needs, binds it behind an :class:`~crosstalk.actors.control_gate.OpGate` at once (a
client polling for the daemon hears ``status``, saying what is still starting), and imports
:mod:`crosstalk.daemon.tree` on a worker thread while the event loop opens the store and keeps
answering. Requests that need the daemon's ops wait at the gate until it opens, within a bound.

Order: refuse damaged state files; the supervisor and the control server (behind the gate); the
import, while the store opens; :func:`crosstalk.daemon.tree.bring_up` plugs the features and starts
their actors; the gate opens; ``on_ready``. SIGTERM and SIGINT cancel the root nursery, which
closes everything in reverse; the store closes after every actor has stopped.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from crosstalk.actors.control import ControlServer
from crosstalk.actors.control_gate import OpGate
from crosstalk.actors.supervisor import Supervisor
from crosstalk.paths import Home
from crosstalk.store import check_state_files
from crosstalk.store.db import Store

if TYPE_CHECKING:  # the daemon's own modules are imported on a worker thread, below
    from types import ModuleType

    from crosstalk.actors.relay_link import Connector
    from crosstalk.daemon.tree import Daemon
    from crosstalk.features.feature import Feature

log = logging.getLogger(__name__)

IMPORT_SWITCH_INTERVAL = 0.0005
"""Seconds a thread may hold the interpreter's lock while the daemon's modules import."""


async def run_daemon(
    home: Home,
    *,
    heartbeat: float,
    features: Sequence[Feature] | None = None,
    on_ready: Callable[[], None] = lambda: None,
    connect: Connector | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the daemon until SIGTERM/SIGINT or cancellation.

    The caller holds the home's lock. Raises DamagedState before touching anything if a state
    file does not parse. ``features`` defaults to
    :data:`~crosstalk.features.registry.FEATURES`.
    """
    check_state_files(home)
    gate = OpGate(str(home.root))
    daemon: Daemon | None = None
    store: Store | None = None
    try:
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(heartbeat=heartbeat)
            await nursery.start(supervisor.run)
            await supervisor.start_actor("control", ControlServer(home.socket, gate))
            # The import and the store's opening run on worker threads (the import holds the
            # interpreter's lock only in slices), so the loop keeps answering the socket.
            body = _Import("crosstalk.daemon.tree")
            nursery.start_soon(body.run)
            store = await Store.open(home.database, open_on=trio.to_thread.run_sync)
            gate.done("store")
            daemon = await (await body.wait()).bring_up(
                home, store, supervisor, heartbeat=heartbeat, features=features, connect=connect
            )
            gate.open(daemon.ops)
            log.info(
                "daemon up: pid %d, home %s, heartbeat %.3gs", os.getpid(), home.root, heartbeat
            )
            on_ready()
            task_status.started()
            await _until_signalled()
            nursery.cancel_scope.cancel()
    finally:
        for tunnel in daemon.tunnels if daemon is not None else []:
            tunnel.kill()
            tunnel.wait()
        if store is not None:
            await store.close()
        home.socket.unlink(missing_ok=True)
        log.info("daemon stopped")


class _Import:
    """One module imported on a worker thread; :meth:`wait` for it (a failed import raises in
    :meth:`run`, which cancels the nursery it runs in)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None
        self._done = trio.Event()

    async def run(self) -> None:
        # The importing thread would keep the interpreter's lock for 5 ms slices; a waiting
        # loop gets it back sooner with shorter ones (a third less time to the first `status`
        # under load, measured interleaved against the 5 ms default).
        old = sys.getswitchinterval()
        sys.setswitchinterval(IMPORT_SWITCH_INTERVAL)
        try:
            self._module = await trio.to_thread.run_sync(importlib.import_module, self._name)
        finally:
            sys.setswitchinterval(old)
        self._done.set()

    async def wait(self) -> ModuleType:
        await self._done.wait()
        assert self._module is not None
        return self._module


async def _until_signalled() -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("daemon stopping on %s", signal.Signals(signum).name)
            return
