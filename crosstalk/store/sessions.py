"""Agent sessions attached to this identity: who is live, in which project, busy or idle.

A session registers (the hook on its first event, or the MCP server) with its name, client and
project; hooks then mark it busy (a prompt started) or idle (a turn stopped). A status nobody
reported is ``unknown``, which the attention gate treats as busy.
"""

from __future__ import annotations

import sqlite3

import attrs

from crosstalk.core.triage import SessionStatus


@attrs.frozen
class Session:
    name: str
    client: str
    project: str
    status: SessionStatus
    inbox_socket: str | None
    registered_at: float
    last_seen: float


def _status(text: str) -> SessionStatus:
    try:
        return SessionStatus(text)
    except ValueError:
        return SessionStatus.UNKNOWN


def register_session(
    conn: sqlite3.Connection,
    *,
    name: str,
    client: str,
    project: str,
    inbox_socket: str | None,
    now: float,
) -> Session:
    """Add or refresh a session (idempotent by name); a new one starts ``unknown``."""
    conn.execute(
        "INSERT INTO sessions (name, client, project, inbox_socket, status, registered_at, "
        "last_seen) VALUES (?, ?, ?, ?, 'unknown', ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "client = excluded.client, project = excluded.project, "
        "inbox_socket = excluded.inbox_socket, last_seen = excluded.last_seen",
        (name, client, project, inbox_socket, now, now),
    )
    found = get_session(conn, name)
    assert found is not None
    return found


def set_status(conn: sqlite3.Connection, name: str, status: SessionStatus, now: float) -> None:
    conn.execute(
        "UPDATE sessions SET status = ?, last_seen = ? WHERE name = ?", (status.value, now, name)
    )


def get_session(conn: sqlite3.Connection, name: str) -> Session | None:
    row = conn.execute(
        "SELECT name, client, project, status, inbox_socket, registered_at, last_seen "
        "FROM sessions WHERE name = ?",
        (name,),
    ).fetchone()
    if row is None:
        return None
    return Session(row[0], row[1], row[2], _status(row[3]), row[4], row[5], row[6])


def list_sessions(conn: sqlite3.Connection) -> list[Session]:
    rows = conn.execute(
        "SELECT name, client, project, status, inbox_socket, registered_at, last_seen "
        "FROM sessions ORDER BY registered_at"
    ).fetchall()
    return [Session(r[0], r[1], r[2], _status(r[3]), r[4], r[5], r[6]) for r in rows]


def session_statuses(conn: sqlite3.Connection) -> dict[str, SessionStatus]:
    """Every session's status by name, for the attention gate."""
    return {s.name: s.status for s in list_sessions(conn)}
