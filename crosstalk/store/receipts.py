"""Receipts owed to senders: written with the change they report, deleted once posted.

``owe`` runs inside the transaction that holds (``delivered``) or marks read (``read``) the
messages, so the receipt is as durable as the state it reports. ``owed`` hands the drain the
oldest rows grouped by room and state (one ``Receipt`` op each); ``settle`` deletes the rows a
posted receipt covered. Posting twice is harmless: the sender's state only moves forward.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

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


def owed(conn: sqlite3.Connection, limit: int = PER_RECEIPT) -> list[Owed]:
    """The oldest owed receipts (at most ``limit`` ids), one entry per room and state."""
    rows = conn.execute(
        "SELECT id, room_id, state, msg_id FROM receipts_owed ORDER BY id LIMIT ?", (limit,)
    ).fetchall()
    groups: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for row_id, room_id, state, msg_id in rows:
        groups.setdefault((str(room_id), str(state)), []).append((int(row_id), str(msg_id)))
    return [
        Owed(room, state, tuple(m for _, m in entries), tuple(r for r, _ in entries))
        for (room, state), entries in groups.items()
    ]


def settle(conn: sqlite3.Connection, rows: Iterable[int]) -> None:
    """The receipt covering ``rows`` is posted (or has nowhere to go): they are owed no more."""
    conn.executemany("DELETE FROM receipts_owed WHERE id = ?", [(row,) for row in rows])
