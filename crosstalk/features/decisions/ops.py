"""The decisions feature's daemon side: hold and announce others' decisions; ``decisions``.

The applier holds the announcement inside the room's transaction (so it is as durable as the
decision itself); after the commit the same announcements are handed to
the local listeners (``tell_local``: the attention gate, ``watch``/``wait``, the inbox push), the
listeners of arrivals the daemon did not get as room messages. A daemon that stops in between
loses nothing: the gate decides held messages it never saw when it starts.
"""

from __future__ import annotations

import functools
import sqlite3
from typing import Protocol

import attrs

from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, Stored, TellsLocal, own_fingerprint
from crosstalk.features.decisions.core import announced
from crosstalk.features.feature import Plugs, op
from crosstalk.features.memory import views as v
from crosstalk.store.decisions import hold_announcement, list_decisions
from crosstalk.wire.control.params import DecisionsParams
from crosstalk.wire.control.replies.memory import DecisionsReply, DecisionView
from crosstalk.wire.control.table_memory import DECISIONS


class Host(Stored, Identified, TellsLocal, Protocol):
    """What decisions use: the store, who we are, and the local listeners to announce to."""


def hold(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: another member's decision is also held as an announcement."""
    op = announced(applied, me=own_fingerprint(daemon))
    if op is not None:
        hold_announcement(conn, applied, op)


async def announce(daemon: Host, applied: list[Applied]) -> None:
    """Listener: hand the announcements of a committed batch to the local listeners."""
    me = own_fingerprint(daemon)
    told = []
    for entry in applied:
        op = announced(entry, me=me)
        if op is not None:
            told.append(attrs.evolve(entry, op=op))
    if told:
        await daemon.tell_local(told)


async def decisions(daemon: Host, params: DecisionsParams) -> DecisionsReply:
    """The ``decisions`` op: the decisions made in a room (or every joined room)."""
    label = daemon.identity.label if daemon.identity is not None else None
    me = own_fingerprint(daemon) or None

    def gather(conn: sqlite3.Connection) -> list[DecisionView]:
        rooms = [v.choose_room(conn, params.room, None)] if params.room else v.joined_rooms(conn)
        return list_decisions(conn, rooms, v.names(conn, me, label))

    return DecisionsReply(await daemon.store.read(gather))


def plug(daemon: Host) -> Plugs:
    """The applier, the announcing listener and the ``decisions`` op."""
    return Plugs(
        ops=(op(DECISIONS, functools.partial(decisions, daemon)),),
        appliers=(functools.partial(hold, daemon),),
        applied_listeners=(functools.partial(announce, daemon),),
    )
