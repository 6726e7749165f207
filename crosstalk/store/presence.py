"""The presence feature's SQL: keep what roommates published, read it back for ``peers``."""

from __future__ import annotations

import sqlite3

import attrs

from crosstalk.core.room import Applied
from crosstalk.wire.room_ops import MAX_NAME, MAX_SESSIONS, SessionsPublished

STATUSES = ("busy", "idle", "unknown")


@attrs.frozen
class PeerSession:
    """One session as ``peers``, ``crosstalk_peers`` and ``status`` show it."""

    name: str
    project: str
    status: str
    last_seen: float


def apply_published(conn: sqlite3.Connection, applied: Applied, *, me: str) -> None:
    """Applier: a roommate's sessions replace what they had published in this room.

    Our own list (from another of our machines) is not a peer's. What the sender wrote is
    bounded here: too many sessions or too long a name are cut, an unknown status is unknown.
    """
    op = applied.op
    if not isinstance(op, SessionsPublished) or applied.sender == me:
        return
    conn.execute(
        "DELETE FROM peer_sessions WHERE fingerprint = ? AND room_id = ?",
        (applied.sender, applied.room_id),
    )
    conn.executemany(
        "INSERT OR REPLACE INTO peer_sessions (fingerprint, room_id, name, project, status, "
        "last_seen, published_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                applied.sender, applied.room_id, s.name[:MAX_NAME], s.project[:MAX_NAME],
                s.status if s.status in STATUSES else "unknown",
                min(s.last_seen, applied.relay_ts), applied.relay_ts,
            )
            for s in op.sessions[:MAX_SESSIONS]
            if s.name
        ],
    )


def peer_sessions(conn: sqlite3.Connection) -> dict[str, list[PeerSession]]:
    """Each person's published sessions, from rooms we are still joined in, newest first.

    A session told to several rooms shows once, as last seen anywhere.
    """
    rows = conn.execute(
        "SELECT p.fingerprint, p.name, p.project, p.status, p.last_seen FROM peer_sessions p "
        "JOIN rooms r ON r.room_id = p.room_id AND r.state = 'joined' "
        "ORDER BY p.last_seen DESC"
    ).fetchall()
    found: dict[str, dict[str, PeerSession]] = {}
    for fingerprint, name, project, status, last_seen in rows:
        found.setdefault(fingerprint, {}).setdefault(
            name, PeerSession(name, project, status, float(last_seen))
        )
    return {fp: list(by_name.values()) for fp, by_name in found.items()}
