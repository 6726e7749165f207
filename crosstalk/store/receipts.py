"""Receipts owed to senders: written with the change they report, deleted once posted.

``owe`` runs inside the transaction that holds (``delivered``) or marks read (``read``) the
messages, so the receipt is as durable as the state it reports. ``owed`` hands the drain the
oldest rows grouped by room and state (one ``Receipt`` op each); ``settle`` deletes the rows a
posted receipt covered. Posting twice is harmless: the sender's state only moves forward.

Only rooms we may post in are drained. A room we were removed from (or are invited back to)
keeps its rows: a member removed and let back in still tells its senders what it read while it
was out. A room we left, or never had, has nowhere to send them: ``drop_unsendable`` deletes
those.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable

import attrs

from crosstalk.store.gate import LOCAL_ROOM

#: The most message ids one ``Receipt`` op carries (its op stays far below the relay's limit).
PER_RECEIPT = 256


@attrs.frozen
class Owed:
    """One receipt to post: ``state`` for ``msg_ids`` in ``room_id`` (rows ``rows``)."""

    room_id: str
    state: str
    msg_ids: tuple[str, ...]
    rows: tuple[int, ...]


def owe(
    conn: sqlite3.Connection, state: str, room_id: str, msg_ids: Iterable[str], now: float
) -> None:
    """Record that ``state`` receipts are owed for ``msg_ids`` (once each; none for local)."""
    if room_id == LOCAL_ROOM:
        return  # a post or a message between our own sessions: nobody to tell
    conn.executemany(
        "INSERT OR IGNORE INTO receipts_owed (room_id, state, msg_id, created_at) "
        "VALUES (?, ?, ?, ?)",
        [(room_id, state, msg_id, now) for msg_id in msg_ids],
    )


def owed(
    conn: sqlite3.Connection, limit: int = PER_RECEIPT, skip: Collection[str] = ()
) -> list[Owed]:
    """The oldest receipts owed in rooms we may post in now (at most ``limit`` ids, none in
    the rooms ``skip`` names), one entry per room and state."""
    marks = ",".join("?" * len(skip))
    rows = conn.execute(
        "SELECT o.id, o.room_id, o.state, o.msg_id FROM receipts_owed o "
        "JOIN rooms r ON r.room_id = o.room_id AND r.state = 'joined' AND r.removed_at IS NULL "
        f"WHERE o.room_id NOT IN ({marks}) ORDER BY o.id LIMIT ?",
        (*skip, limit),
    ).fetchall()
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for row_id, room_id, state, msg_id in rows:
        groups.setdefault((str(room_id), str(state)), []).append((int(row_id), str(msg_id)))
    return [
        Owed(room, state, tuple(m for _, m in entries), tuple(r for r, _ in entries))
        for (room, state), entries in groups.items()
    ]


def drop_unsendable(conn: sqlite3.Connection) -> None:
    """Forget the receipts owed in rooms we left or never had (nowhere to send them)."""
    conn.execute(
        "DELETE FROM receipts_owed WHERE room_id NOT IN "
        "(SELECT room_id FROM rooms WHERE state IN ('joined', 'invited'))"
    )


def settle(conn: sqlite3.Connection, rows: Iterable[int]) -> None:
    """The receipt covering ``rows`` is posted (or has nowhere to go): they are owed no more."""
    conn.executemany("DELETE FROM receipts_owed WHERE id = ?", [(row,) for row in rows])
