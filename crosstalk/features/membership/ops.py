"""Membership's part in the daemon: the key-share appliers and the listener that answers a joiner
who accepted with an older key (see :mod:`crosstalk.features.membership.key_share`)."""

from __future__ import annotations

import sqlite3
from typing import Protocol

from crosstalk.core.room import Applied
from crosstalk.features.caps import Identified, SendsOps, Stored
from crosstalk.features.feature import Plugs
from crosstalk.features.membership.key_share import apply_key_share, owe_shares, send_owed
from crosstalk.wire.room_ops import MemberNamed


class Host(Stored, Identified, SendsOps, Protocol):
    """What membership's seams use: the store, our keys, and rooms to send key shares into."""


def plug(daemon: Host) -> Plugs:
    """The appliers and the listener (membership has no control ops of its own here)."""
    def take_shared_key(conn: sqlite3.Connection, applied: Applied) -> None:
        apply_key_share(conn, applied, daemon.keys)

    def owe(conn: sqlite3.Connection, applied: Applied) -> None:
        owe_shares(conn, applied, daemon.keys.fingerprint)

    async def answer_joiners(applied: list[Applied]) -> None:
        # Only a joiner naming itself can be owed keys: no read for the rest.
        rooms = {e.room_id for e in applied if isinstance(e.op, MemberNamed)}
        if rooms:
            await send_owed(daemon.store, daemon.send_op, rooms)

    return Plugs(
        appliers=(take_shared_key, owe),
        key_takers=(take_shared_key,),
        applied_listeners=(answer_joiners,),
    )
