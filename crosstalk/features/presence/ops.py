"""The presence feature's daemon side: the applier, the actor, and what ``peers`` reads."""

from __future__ import annotations

import sqlite3
from typing import Protocol

from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, SendsOps, Stored, Supervises
from crosstalk.features.feature import Plugs
from crosstalk.features.presence.actor import PresenceActor
from crosstalk.store.presence import apply_published


class Host(Stored, Identified, SendsOps, Supervises, Protocol):
    """What presence uses: the store, who we are, and its actor, which posts into rooms."""


def plug(daemon: Host) -> Plugs:
    """Keep roommates' published sessions; publish ours (no control ops of its own: ``peers``
    and ``status`` read :func:`~crosstalk.store.presence.peer_sessions`)."""

    def me() -> str:
        return daemon.keys.fingerprint if daemon.identity is not None else ""

    def keep(conn: sqlite3.Connection, applied: Applied) -> None:
        apply_published(conn, applied, me=me())

    async def start() -> None:
        actor = PresenceActor(
            store=daemon.store, send_op=daemon.send_op, ready=lambda: daemon.identity is not None
        )
        await daemon.supervisor.start_actor("presence", actor)

    return Plugs(appliers=(keep,), start=(start,))
