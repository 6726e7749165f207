"""The presence feature's daemon side: the applier, the actor, and what ``peers`` reads."""

from __future__ import annotations

from crosstalk.actors.control import OpTable
from crosstalk.daemon import Daemon
from crosstalk.features.presence.actor import PresenceActor
from crosstalk.store.presence import apply_published


def register(ops: OpTable, daemon: Daemon) -> None:
    """Keep roommates' published sessions; publish ours (no control ops of its own: ``peers``
    and ``status`` read :func:`~crosstalk.store.presence.peer_sessions`)."""
    del ops

    def me() -> str:
        return daemon.keys.fingerprint if daemon.identity is not None else ""

    daemon.appliers.append(lambda conn, applied: apply_published(conn, applied, me=me()))

    async def start() -> None:
        actor = PresenceActor(
            store=daemon.store, send_op=daemon.send_op, ready=lambda: daemon.identity is not None
        )
        await daemon.supervisor.start_actor("presence", actor)

    daemon.on_start.append(start)
