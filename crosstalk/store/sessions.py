"""Agent sessions attached to this identity: who is live, in which project, busy or idle.

A session registers (the hook on every event, or the MCP server) with its name, client and
project, and, when its client says where it keeps one, its transcript file; hooks then mark it
busy (a prompt started) or idle (a turn stopped). A status nobody reported is ``unknown``, which
the attention gate treats as busy.

The transcript path lets ``--slice turns`` work without being told where the transcript is:
:func:`current_transcript` picks the named session's, else that of the session most recently
seen in the project the sender works in.

The projects are also the only places ``file:`` and ``diff:`` slices come from
(:func:`slice_projects`): a request's ``cwd`` is whatever its caller wrote, so it chooses among
them and never names a place of its own.
"""

from __future__ import annotations

import sqlite3
from pathlib import PurePath

import attrs

from crosstalk.core.triage import SessionStatus

_COLUMNS = "name, client, project, status, inbox_socket, registered_at, last_seen, transcript_path"


@attrs.frozen
class Session:
    name: str
    client: str
    project: str
    status: SessionStatus
    inbox_socket: str | None
    registered_at: float
    last_seen: float
    transcript_path: str | None = None


def _status(text: str) -> SessionStatus:
    try:
        return SessionStatus(text)
    except ValueError:
        return SessionStatus.UNKNOWN


def _session(row: tuple[str, str, str, str, str | None, float, float, str | None]) -> Session:
    return Session(row[0], row[1], row[2], _status(row[3]), row[4], row[5], row[6], row[7])


def register_session(
    conn: sqlite3.Connection,
    *,
    name: str,
    client: str,
    project: str,
    inbox_socket: str | None,
    now: float,
    transcript_path: str | None = None,
) -> Session:
    """Add or refresh a session (idempotent by name); a new one starts ``unknown``.

    A refresh that names no transcript keeps the one already recorded (the MCP server and some
    events do not know it; the path does not change within a session).
    """
    conn.execute(
        "INSERT INTO sessions (name, client, project, inbox_socket, status, registered_at, "
        "last_seen, transcript_path) VALUES (?, ?, ?, ?, 'unknown', ?, ?, ?) "
        "ON CONFLICT (name) DO UPDATE SET "
        "client = excluded.client, project = excluded.project, "
        "inbox_socket = excluded.inbox_socket, last_seen = excluded.last_seen, "
        "transcript_path = coalesce(excluded.transcript_path, sessions.transcript_path)",
        (name, client, project, inbox_socket, now, now, transcript_path),
    )
    found = get_session(conn, name)
    assert found is not None
    return found


def set_status(conn: sqlite3.Connection, name: str, status: SessionStatus, now: float) -> None:
    conn.execute(
        "UPDATE sessions SET status = ?, last_seen = ? WHERE name = ?", (status.value, now, name)
    )


def get_session(conn: sqlite3.Connection, name: str) -> Session | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE name = ?", (name,)).fetchone()
    return None if row is None else _session(row)


def list_sessions(conn: sqlite3.Connection) -> list[Session]:
    rows = conn.execute(f"SELECT {_COLUMNS} FROM sessions ORDER BY registered_at").fetchall()
    return [_session(r) for r in rows]


def seen_since(conn: sqlite3.Connection, since: float) -> list[Session]:
    """The sessions heard from at or after ``since``, in registration order.

    Through ``sessions_by_last_seen``: the gate asks on every busy/idle turn and every arrival,
    and sessions stay a month (retention) while only the last hours' count as live.
    """
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE last_seen >= ? ORDER BY registered_at", (since,)
    ).fetchall()
    return [_session(r) for r in rows]


def session_statuses(conn: sqlite3.Connection) -> dict[str, SessionStatus]:
    """Every session's status by name, for the attention gate."""
    return {s.name: s.status for s in list_sessions(conn)}


def current_transcript(
    conn: sqlite3.Connection, *, session: str | None, cwd: str | None
) -> str | None:
    """The transcript of the session a sender speaks for, or None when none is known.

    ``session`` named and registered: that session's recorded transcript (or None: never a
    neighbour's). Otherwise (no name, or a name no hook registered, as an MCP server may give)
    the session seen most recently whose project contains ``cwd``, the innermost project winning
    a tie in time: the agent running the command when a CLI inside an agent's shell sends.
    """
    named = None if session is None else get_session(conn, session)
    if named is not None:
        return named.transcript_path
    if not cwd:
        return None
    here = PurePath(cwd)
    candidates = [
        s
        for s in list_sessions(conn)
        if s.transcript_path and s.project and here.is_relative_to(s.project)
    ]
    if not candidates:
        return None
    best = max(candidates, key=lambda s: (s.last_seen, len(s.project)))
    return best.transcript_path


def slice_projects(conn: sqlite3.Connection, *, session: str | None) -> list[str]:
    """The projects a send may take ``file:`` and ``diff:`` slices from.

    ``session`` named and registered: that session's project alone (an agent slices its own
    project). Otherwise (no name, or one no hook registered, as an MCP server may give) every
    registered session's project; the caller's ``cwd`` picks among them.
    """
    named = None if session is None else get_session(conn, session)
    if named is not None:
        return [named.project] if named.project else []
    return sorted({s.project for s in list_sessions(conn) if s.project})
