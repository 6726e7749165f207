"""The daemon's root: one per state directory, owning every actor and all durable state.

Start-up order (each step completes before the next): refuse damaged state files, open the
store, start the supervisor, then the actors in dependency order, the control server last so
that nothing is asked of the daemon before it can answer. SIGTERM and SIGINT cancel the root
nursery, which closes everything in reverse.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

import attrs
import trio

from crosstalk import __version__
from crosstalk.actors.control import ControlServer, OpTable
from crosstalk.actors.supervisor import ActorHealth, Supervisor
from crosstalk.paths import Home
from crosstalk.store import check_state_files
from crosstalk.store.db import Store

log = logging.getLogger(__name__)


@attrs.frozen
class NoParams:
    """An op that takes no parameters."""


@attrs.frozen
class StatusReply:
    pid: int
    version: str
    home: str
    uptime_s: float


@attrs.frozen
class ActorRow:
    name: str
    state: str
    restarts: int
    last_error: str | None
    beat_age_s: float
    inbox: int

    @classmethod
    def from_health(cls, health: ActorHealth) -> ActorRow:
        return cls(
            name=health.name,
            state=health.state.name.lower(),
            restarts=health.restarts,
            last_error=health.last_error,
            beat_age_s=round(health.beat_age_s, 3),
            inbox=health.inbox,
        )


@attrs.frozen
class HealthReply:
    actors: list[ActorRow]


def build_ops(home: Home, supervisor: Supervisor, started_at: float) -> OpTable:
    """The control ops of the daemon core; later layers register theirs alongside."""
    ops = OpTable()

    async def status(_: NoParams) -> StatusReply:
        return StatusReply(
            pid=os.getpid(),
            version=__version__,
            home=str(home.root),
            uptime_s=round(trio.current_time() - started_at, 3),
        )

    async def health(_: NoParams) -> HealthReply:
        return HealthReply([ActorRow.from_health(h) for h in supervisor.statistics()])

    ops.add("status", NoParams, status)
    ops.add("health", NoParams, health)
    return ops


async def run_daemon(
    home: Home,
    *,
    heartbeat: float,
    on_ready: Callable[[], None] = lambda: None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the daemon until SIGTERM/SIGINT or cancellation.

    The caller holds the home's lock. Raises DamagedState before touching anything if a state
    file does not parse.
    """
    check_state_files(home)
    store = await Store.open(home.database)
    try:
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(heartbeat=heartbeat)
            await nursery.start(supervisor.run)
            ops = build_ops(home, supervisor, trio.current_time())
            await supervisor.start_actor("control", ControlServer(home.socket, ops))
            log.info(
                "daemon up: pid %d, home %s, heartbeat %.3gs", os.getpid(), home.root, heartbeat
            )
            on_ready()
            task_status.started()
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("daemon stopping on %s", signal.Signals(signum).name)
                    nursery.cancel_scope.cancel()
                    break
    finally:
        await store.close()
        home.socket.unlink(missing_ok=True)
        log.info("daemon stopped")
