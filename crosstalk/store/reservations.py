"""Reading rooms' file reservations without loading their whole memory.

The reservation book is part of each room's memory (written by :mod:`crosstalk.store.memory`);
the hooks ask about it before every edit an agent makes, so these reads touch only the
reservation tables. Whether a reservation still holds is decided at a *relay* time: replicas
agree on what lapsed in the log by the relay's timestamps, and a reader asking "now" uses
:func:`relay_now`, our clock corrected by how far the relay's clock was from ours on the newest op
we received (so a laptop whose clock is an hour off still shows what everyone else sees).
"""

from __future__ import annotations

import json
import sqlite3
import time

import attrs

from crosstalk.wire.converter import converter
from crosstalk.wire.reservations import Reservation, ReservationOutcome


@attrs.frozen
class HeldIn:
    """A reservation that holds, and the room it is in."""

    room_id: str
    reservation: Reservation


def relay_now(conn: sqlite3.Connection, now: float | None = None) -> float:
    """Our best reading of the relay's clock: ``now`` (default: our clock) plus the relay's lead
    on the newest op received (0 before any)."""
    now = time.time() if now is None else now
    row = conn.execute(
        "SELECT relay_ts, received_at FROM relay_inbound ORDER BY received_at DESC LIMIT 1"
    ).fetchone()
    if row is None or not row[0]:
        return now
    return now + float(row[0]) - float(row[1])


def held(conn: sqlite3.Connection, room_ids: list[str], *, at: float) -> list[HeldIn]:
    """The reservations of these rooms that hold at relay time ``at``, oldest grant first."""
    found: list[HeldIn] = []
    for room_id in room_ids:
        rows = conn.execute(
            "SELECT body FROM reservation_held WHERE room_id = ?", (room_id,)
        ).fetchall()
        for (body,) in rows:
            reservation = converter.structure(json.loads(body), Reservation)
            if reservation.until > at:
                found.append(HeldIn(room_id, reservation))
    found.sort(key=lambda h: (h.reservation.granted_at, h.reservation.reservation_id))
    return found


def outcome(conn: sqlite3.Connection, room_id: str, op_id: str) -> ReservationOutcome | None:
    """What our reservation op did, once it is applied here."""
    row = conn.execute(
        "SELECT body FROM reservation_outcomes WHERE room_id = ? AND op_id = ?", (room_id, op_id)
    ).fetchone()
    return None if row is None else converter.structure(json.loads(row[0]), ReservationOutcome)
