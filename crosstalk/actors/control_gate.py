"""What the control socket serves while the daemon starts: the gate in front of its op table.

The daemon binds its control socket before it imports and plugs its features (about two thirds
of its start-up is importing them), so a client that asks early is answered instead of refused.
Until the daemon hands the gate its op table, ``status`` is answered by the gate itself and says
which parts are still starting; every other op waits for the table, within a bound, and is then
served by it exactly as it would have been. Nothing is ever answered from a half-built daemon.

States: STARTING (``status`` from the gate, other ops wait) -> OPEN (everything from the table).
``done(part)`` marks one part of the start as finished; ``open(table)`` ends the start.
"""

from __future__ import annotations

import os

import trio

from crosstalk import __version__
from crosstalk.actors.control import OpTable
from crosstalk.errors import DaemonStarting
from crosstalk.wire.control.params import NoParams
from crosstalk.wire.control.replies.daemon import StartingStatus
from crosstalk.wire.control.table import STATUS

START_WAIT = 30.0
"""How long an op other than ``status`` waits for the daemon to finish starting."""

PARTS = ("store", "features")
"""The parts a daemon start goes through, in order, as ``status`` names them while starting."""


class OpGate:
    """The op tables behind the control socket: the gate's own while starting, then the daemon's.

    Args:
        home: the home's root, as ``status`` shows it.
        wait: how long a request that needs the daemon's ops waits for them.
    """

    def __init__(self, home: str, *, wait: float = START_WAIT) -> None:
        self._home = home
        self._wait = wait
        self._started_at = trio.current_time()
        self._pending = list(PARTS)
        self._table: OpTable | None = None
        self._opened = trio.Event()
        self._front = OpTable()
        self._front.add(STATUS, self._status)

    def done(self, part: str) -> None:
        """``part`` (one of :data:`PARTS`) has finished starting."""
        if part in self._pending:
            self._pending.remove(part)

    def open(self, table: OpTable) -> None:
        """The daemon is up: from now on ``table`` serves every op, and waiting ones go on."""
        self._pending.clear()
        self._table = table
        self._opened.set()

    async def table_for(self, op: str) -> OpTable:
        """The table that serves ``op``: the daemon's once open; the gate's for ``status`` while
        starting; for anything else, the daemon's as soon as it opens (DaemonStarting past the
        bound)."""
        if self._table is not None:
            return self._table  # open: no wait, no cancel scope, on every request's path
        if self._front.has(op):
            return self._front
        with trio.move_on_after(self._wait):
            await self._opened.wait()
        if self._table is None:
            still = ", ".join(self._pending) or "its control socket"
            raise DaemonStarting(
                f"The daemon is still starting ({still}) after {self._wait:.0f} s; try again."
            )
        return self._table

    async def _status(self, _: NoParams) -> StartingStatus:
        return StartingStatus(
            pid=os.getpid(),
            version=__version__,
            home=self._home,
            uptime_s=round(trio.current_time() - self._started_at, 3),
            starting=list(self._pending),
        )
