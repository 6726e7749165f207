"""Table for peer sessions (migration step 9): what roommates published about their sessions.

One row per (person, room, session): a person's latest :class:`SessionsPublished` in a room
replaces every row they had there. Kept per room so that what someone told one room is
forgotten with that room, and never shown as told elsewhere.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE peer_sessions (
        fingerprint TEXT NOT NULL,
        room_id TEXT NOT NULL,
        name TEXT NOT NULL,
        project TEXT NOT NULL,
        status TEXT NOT NULL,
        last_seen REAL NOT NULL,
        published_at REAL NOT NULL,
        PRIMARY KEY (fingerprint, room_id, name)
    )""",
)
