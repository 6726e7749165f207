"""A room's inbound log as its room actor reads it: the ops the link committed, the cursor of
what was applied, and moving that cursor inside the apply transaction.

``relay_inbound`` holds every op the relay pushed for a room (crosstalk/store/link.py writes it);
``room_cursors`` holds the seq up to which the room actor has applied them. Every function takes
the open connection, so a batch's reads, its appliers and the cursor move are one transaction.
"""

from __future__ import annotations

import sqlite3

import attrs


@attrs.frozen
class InboundOp:
    """One sealed op of the room's log, as the relay sequenced it."""

    op_id: str
    seq: int
    sender: str
    body: bytes
    relay_ts: float


def applied_cursor(conn: sqlite3.Connection, room_id: str) -> int:
    """The seq up to which the room's ops were applied here (0 before any)."""
    row = conn.execute("SELECT seq FROM room_cursors WHERE room_id = ?", (room_id,)).fetchone()
    return int(row[0]) if row else 0


def inbound_after(conn: sqlite3.Connection, room_id: str, seq: int, limit: int) -> list[InboundOp]:
    """Up to ``limit`` of the room's inbound ops after ``seq``, in order."""
    rows = conn.execute(
        "SELECT op_id, seq, sender, body, relay_ts FROM relay_inbound "
        "WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (room_id, seq, limit),
    ).fetchall()
    return [InboundOp(str(r[0]), int(r[1]), str(r[2]), bytes(r[3]), float(r[4])) for r in rows]


def pending(conn: sqlite3.Connection, room_id: str, limit: int) -> list[InboundOp]:
    """Up to ``limit`` of the room's inbound ops after its applied cursor, in order: what
    ``inbound_after(conn, room_id, applied_cursor(conn, room_id), limit)`` reads, in one query."""
    rows = conn.execute(
        "SELECT op_id, seq, sender, body, relay_ts FROM relay_inbound WHERE room_id = ? AND "
        "seq > coalesce((SELECT seq FROM room_cursors WHERE room_id = ?), 0) "
        "ORDER BY seq LIMIT ?",
        (room_id, room_id, limit),
    ).fetchall()
    return [InboundOp(str(r[0]), int(r[1]), str(r[2]), bytes(r[3]), float(r[4])) for r in rows]


def advance_applied(conn: sqlite3.Connection, room_id: str, seq: int) -> None:
    """The room's ops up to ``seq`` are applied (the cursor never moves back)."""
    conn.execute(
        "INSERT INTO room_cursors (room_id, seq) VALUES (?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET seq = max(seq, excluded.seq)",
        (room_id, seq),
    )


def newest_epoch(conn: sqlite3.Connection, room_id: str) -> int:
    """The newest key epoch we hold for the room (0 when none)."""
    row = conn.execute("SELECT max(epoch) FROM room_keys WHERE room_id = ?", (room_id,)).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def epochs_held(conn: sqlite3.Connection, room_id: str) -> frozenset[int]:
    """The epochs whose key we hold for the room."""
    rows = conn.execute("SELECT epoch FROM room_keys WHERE room_id = ?", (room_id,))
    return frozenset(int(r[0]) for r in rows)


def relay_cursor(conn: sqlite3.Connection, room_id: str) -> int:
    """The seq up to which the link has committed the room's ops here (0 before any)."""
    row = conn.execute("SELECT seq FROM relay_cursors WHERE room_id = ?", (room_id,)).fetchone()
    return int(row[0]) if row else 0


def relay_cursors(conn: sqlite3.Connection) -> dict[str, int]:
    """Each room's relay cursor: the seq up to which the link has committed its ops here."""
    return {str(r): int(s) for r, s in conn.execute("SELECT room_id, seq FROM relay_cursors")}


def start_at(conn: sqlite3.Connection, room_id: str, seq: int) -> None:
    """Set both of the room's cursors (link and applied) to ``seq``: a linked machine starts
    where the other one stands, and gets everything after it."""
    for table in ("relay_cursors", "room_cursors"):
        conn.execute(
            f"INSERT INTO {table} (room_id, seq) VALUES (?, ?) "
            "ON CONFLICT (room_id) DO UPDATE SET seq = excluded.seq",
            (room_id, seq),
        )
