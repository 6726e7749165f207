"""The decisions feature's daemon side: hold and announce others' decisions; ``decisions``.

The applier holds the announcement inside the room's transaction (so it is as durable as the
decision itself); after the commit the same announcements are handed to
``daemon.local_listeners`` (the attention gate, ``watch``/``wait``, the inbox push), the
listeners of arrivals the daemon did not get as room messages. A daemon that stops in between
loses nothing: the gate decides held messages it never saw when it starts.
"""

from __future__ import annotations

import sqlite3

import attrs

from crosstalk.actors.control import OpTable
from crosstalk.core.room import Applied
from crosstalk.daemon import Daemon
from crosstalk.features.decisions.core import announced
from crosstalk.ops import memory_views as v
from crosstalk.store.decisions import DecisionView, hold_announcement, list_decisions


@attrs.frozen
class DecisionsParams:
    room: str | None = None
    cwd: str | None = None  # the CLI sends it with every memory command; the list is per room


@attrs.frozen
class DecisionsReply:
    decisions: list[DecisionView]


def register(ops: OpTable, daemon: Daemon) -> None:
    """Add the applier, the announcing listener and the ``decisions`` op."""

    def me() -> str:
        return daemon.keys.fingerprint if daemon.identity is not None else ""

    def hold(conn: sqlite3.Connection, applied: Applied) -> None:
        op = announced(applied, me=me())
        if op is not None:
            hold_announcement(conn, applied, op)

    daemon.appliers.append(hold)

    async def announce(applied: list[Applied]) -> None:
        told = []
        for entry in applied:
            op = announced(entry, me=me())
            if op is not None:
                told.append(attrs.evolve(entry, op=op))
        if told:
            for listener in daemon.local_listeners:
                await listener(told)

    daemon.applied_listeners.append(announce)

    async def decisions(params: DecisionsParams) -> DecisionsReply:
        label = daemon.identity.label if daemon.identity is not None else None

        def gather(conn: sqlite3.Connection) -> list[DecisionView]:
            rooms = (
                [v.choose_room(conn, params.room, None)] if params.room else v.joined_rooms(conn)
            )
            return list_decisions(conn, rooms, v.names(conn, me() or None, label))

        return DecisionsReply(await daemon.store.read(gather))

    ops.add("decisions", DecisionsParams, decisions)
