"""Tables for edit awareness (crosstalk/features/edits/): which files agents wrote lately.

``own_edits``: what our own sessions wrote, one row per (session, repository, path), so the
publisher has the whole recent set to send and ``peers`` shows it. ``peer_edits``: what
roommates published, one row per (person, room, session, repository, path); a person's newest
``EditsPublished`` for a session and repository in a room replaces their rows for it there, so
what someone told one room is forgotten with that room, as ``peer_sessions`` is.

``repo_key`` is the repository name casefolded (names compare case-insensitively, as facts'
``--in`` tags do); ``edited_at`` is indexed so rows past the window go in one range delete.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE own_edits (
        session TEXT NOT NULL,
        repo TEXT NOT NULL,
        repo_key TEXT NOT NULL,
        path TEXT NOT NULL,
        edited_at REAL NOT NULL,
        PRIMARY KEY (session, repo_key, path)
    )""",
    "CREATE INDEX own_edits_by_time ON own_edits (edited_at)",
    """CREATE TABLE peer_edits (
        fingerprint TEXT NOT NULL,
        room_id TEXT NOT NULL,
        session TEXT NOT NULL,
        repo TEXT NOT NULL,
        repo_key TEXT NOT NULL,
        path TEXT NOT NULL,
        edited_at REAL NOT NULL,
        note TEXT NOT NULL DEFAULT '',
        published_at REAL NOT NULL,
        PRIMARY KEY (fingerprint, room_id, session, repo_key, path)
    )""",
    "CREATE INDEX peer_edits_by_path ON peer_edits (repo_key, path)",
    "CREATE INDEX peer_edits_by_time ON peer_edits (edited_at)",
)
