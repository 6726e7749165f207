"""Messages as this machine holds them: the held rows that came to us.

Every function takes the open connection, so it composes inside one ``store.read`` or
``store.write`` transaction.
"""

from __future__ import annotations

import sqlite3


def held_body(conn: sqlite3.Connection, message_id: str) -> str | None:
    """The stored body (JSON) of a held message, or None if we hold no such message."""
    row = conn.execute(
        "SELECT body FROM held_messages WHERE message_id = ?", (message_id,)
    ).fetchone()
    return None if row is None else str(row[0])
