"""A room's keys, epochs and removals, and taking a room off this machine.

A room key belongs to an epoch; ``rooms.epoch`` is the newest epoch we send under. Keys arrive by
invitation, by a ``Rekey`` sealed to us, by our own kick, or in a linked machine's bundle; none is
ever replaced (``INSERT OR IGNORE``), and the epoch only moves forward. Two members removing at
once both mint the next epoch: the second key to arrive is kept beside the first
(``room_key_alternates``), so what either sealed still opens. A removed member's rows stay,
marked gone, so what they signed before still verifies.

Every function takes the open connection, so it composes inside one ``store.write`` transaction.
"""

from __future__ import annotations

import sqlite3


def keep_key(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> None:
    """Hold ``key`` for the room's ``epoch`` (a key we already hold for it is kept)."""
    conn.execute(
        "INSERT OR IGNORE INTO room_keys (room_id, epoch, key) VALUES (?, ?, ?)",
        (room_id, epoch, key),
    )


def take_key(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> None:
    """Hold ``key`` for ``epoch`` and send under it from now on, unless we hold a newer epoch."""
    keep_key(conn, room_id, epoch, key)
    conn.execute("UPDATE rooms SET epoch = max(epoch, ?) WHERE room_id = ?", (epoch, room_id))


def rotate_key(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> None:
    """Our kick: the room moves to ``epoch`` under ``key`` (minted here; if a rekey for
    ``epoch`` from someone else came first, ours is kept beside it). The removed member is
    already gone from the roster the kick fetched after the removal, unless someone invited
    them back since; then they stay listed, as the relay has them (sim seed 7520)."""
    held = _held(conn, room_id, epoch)
    if held is None:
        conn.execute(
            "INSERT INTO room_keys (room_id, epoch, key, minted) VALUES (?, ?, ?, 1)",
            (room_id, epoch, key),
        )
    elif held[0] != key:
        _keep_alternate(conn, room_id, epoch, key)
    conn.execute("UPDATE rooms SET epoch = max(epoch, ?) WHERE room_id = ?", (epoch, room_id))


def take_rekeyed(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> bool:
    """A key a rekey (or a share of one) brought for ``epoch``: taken if we hold none for it,
    kept beside the one we hold if it differs (two members rekeyed at once). ``True`` when it
    differs from a key we minted ourselves for that epoch."""
    held = _held(conn, room_id, epoch)
    if held is None:
        take_key(conn, room_id, epoch, key)
        return False
    if held[0] == key:
        return False
    _keep_alternate(conn, room_id, epoch, key)
    return held[1]


def alternates(conn: sqlite3.Connection, room_id: str, epoch: int) -> list[bytes]:
    """The other keys minted for the room's ``epoch`` (see :func:`take_rekeyed`)."""
    rows = conn.execute(
        "SELECT key FROM room_key_alternates WHERE room_id = ? AND epoch = ?", (room_id, epoch)
    )
    return [bytes(r[0]) for r in rows]


def minted_epoch(conn: sqlite3.Connection, room_id: str, epoch: int) -> bool:
    """Whether the key we seal with for ``epoch`` is one we minted (our own kick)."""
    held = _held(conn, room_id, epoch)
    return held is not None and held[1]


def _held(conn: sqlite3.Connection, room_id: str, epoch: int) -> tuple[bytes, bool] | None:
    row = conn.execute(
        "SELECT key, minted FROM room_keys WHERE room_id = ? AND epoch = ?", (room_id, epoch)
    ).fetchone()
    return None if row is None else (bytes(row[0]), bool(row[1]))


def _keep_alternate(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO room_key_alternates (room_id, epoch, key) VALUES (?, ?, ?)",
        (room_id, epoch, key),
    )


def mark_gone(conn: sqlite3.Connection, room_id: str, fingerprint: str) -> None:
    """The member left the room's roster; their row stays so their old signatures verify."""
    conn.execute(
        "UPDATE room_members SET gone = 1 WHERE room_id = ? AND fingerprint = ?",
        (room_id, fingerprint),
    )


def epoch_keys(conn: sqlite3.Connection, room_id: str) -> list[tuple[int, bytes]]:
    """Every ``(epoch, key)`` we hold for the room, oldest first."""
    rows = conn.execute(
        "SELECT epoch, key FROM room_keys WHERE room_id = ? ORDER BY epoch", (room_id,)
    ).fetchall()
    return [(int(epoch), bytes(key)) for epoch, key in rows]


def forget_room(conn: sqlite3.Connection, room_id: str) -> None:
    """Take what the room knows off this machine (we left or declined it).

    The room's own row stays, marked ``left``: the outbox rows of what we sent hang off it, so
    ``sent`` keeps saying how far each message got (one still queued is refused by the relay,
    and ends ``refused``). Everything else that hangs off the room goes, whichever feature made
    it: every table with a foreign key to ``rooms`` but the outbox.

    The room is marked ``left`` first: the search index keeps what we held in a room we were in
    (its triggers skip the messages and memory of a room marked ``left``; schema_search.py).
    """
    conn.execute("UPDATE rooms SET state = 'left' WHERE room_id = ?", (room_id,))
    conn.execute("DELETE FROM held_messages WHERE room_id = ?", (room_id,))
    conn.execute("DELETE FROM relay_inbound WHERE room_id = ?", (room_id,))
    conn.execute("DELETE FROM relay_cursors WHERE room_id = ?", (room_id,))
    for table in _tables_of_rooms(conn):
        if table != "outbox":
            conn.execute(f"DELETE FROM {table} WHERE room_id = ?", (room_id,))  # our own names


def _tables_of_rooms(conn: sqlite3.Connection) -> list[str]:
    """Every table whose rows hang off ``rooms`` by a foreign key."""
    tables = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'rooms'"
    )]
    return [t for t in tables
            if any(fk[2] == "rooms" for fk in conn.execute(f"PRAGMA foreign_key_list({t})"))]


def reopen_room(conn: sqlite3.Connection, room_id: str, epoch: int, key: bytes) -> None:
    """A room we left or were removed from, invited to again: pending once more, at ``epoch``."""
    conn.execute(
        "UPDATE rooms SET state = 'invited', epoch = ?, removed_at = NULL, removed_by = NULL "
        "WHERE room_id = ?",
        (epoch, room_id),
    )
    keep_key(conn, room_id, epoch, key)
