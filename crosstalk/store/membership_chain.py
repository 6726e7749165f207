"""The membership history's SQL: each room's verified statements, and the alarms a relay caused.

A room's history is stored statement by statement, each with the link it leads to, so the head a
new statement names (and the link at any index a roommate compares) is one lookup. Statements
are stored only once verified (:mod:`crosstalk.features.membership.history`).
"""

from __future__ import annotations

import json
import sqlite3

from crosstalk.wire.chain import ZERO, Statement
from crosstalk.wire.converter import structure_remote, unstructure


def statements(conn: sqlite3.Connection, room_id: str) -> list[Statement]:
    """The room's verified history, in order."""
    rows = conn.execute(
        "SELECT stmt FROM membership_chain WHERE room_id = ? ORDER BY idx", (room_id,)
    ).fetchall()
    return [structure_remote(json.loads(text), Statement) for (text,) in rows]


def head(conn: sqlite3.Connection, room_id: str) -> tuple[int, bytes]:
    """``(index, link)`` of the newest statement we hold, ``(-1, ZERO)`` for none."""
    row = conn.execute(
        "SELECT idx, link FROM membership_chain WHERE room_id = ? ORDER BY idx DESC LIMIT 1",
        (room_id,),
    ).fetchone()
    return (-1, ZERO) if row is None else (int(row[0]), bytes(row[1]))


def link_at(conn: sqlite3.Connection, room_id: str, index: int) -> bytes | None:
    row = conn.execute(
        "SELECT link FROM membership_chain WHERE room_id = ? AND idx = ?", (room_id, index)
    ).fetchone()
    return None if row is None else bytes(row[0])


def append(
    conn: sqlite3.Connection, room_id: str, start: int, added: list[tuple[Statement, bytes]]
) -> None:
    """Store verified statements from index ``start`` on, each with its link."""
    conn.executemany(
        "INSERT INTO membership_chain (room_id, idx, link, stmt) VALUES (?, ?, ?, ?)",
        [(room_id, start + i, link, json.dumps(unstructure(s)))
         for i, (s, link) in enumerate(added)],
    )


def forget(conn: sqlite3.Connection, room_id: str) -> None:
    """A room we are no longer in: its history goes with it (a new invitation starts again)."""
    conn.execute("DELETE FROM membership_chain WHERE room_id = ?", (room_id,))
    conn.execute("DELETE FROM membership_alarms WHERE room_id = ?", (room_id,))


def raise_alarm(conn: sqlite3.Connection, room_id: str, reason: str, now: float) -> bool:
    """Record that the relay offered something about this room that does not verify; False if
    the same alarm stands already (the first time it was seen is kept)."""
    row = conn.execute(
        "SELECT reason FROM membership_alarms WHERE room_id = ?", (room_id,)
    ).fetchone()
    if row is not None and row[0] == reason:
        return False
    conn.execute(
        "INSERT INTO membership_alarms (room_id, at, reason) VALUES (?, ?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET at = excluded.at, reason = excluded.reason",
        (room_id, now, reason),
    )
    return True


def alarm(conn: sqlite3.Connection, room_id: str) -> tuple[float, str] | None:
    """When and why the relay's word about this room last failed to verify, if it did."""
    row = conn.execute(
        "SELECT at, reason FROM membership_alarms WHERE room_id = ?", (room_id,)
    ).fetchone()
    return None if row is None else (float(row[0]), str(row[1]))
