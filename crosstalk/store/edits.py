"""Edit awareness's SQL: our sessions' recent edits, roommates' published ones, the settings.

All of it is bounded by the window: every write deletes rows older than it (through the
``edited_at`` indexes), and a (session, repository) keeps at most ``MAX_EDITED_PATHS`` paths.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence

import attrs

from crosstalk.core.edits import recent
from crosstalk.core.room import Applied
from crosstalk.store.settings import JSONValue, get_setting, set_setting
from crosstalk.wire.room_ops import (
    MAX_EDIT_NOTE,
    MAX_EDITED_PATHS,
    MAX_NAME,
    EditedPath,
    EditsPublished,
)

#: Room ids where our edits are not told (a list).
ROOMS_OFF = "edits.rooms_off"
#: What to do before writing a file someone else holds exclusively: allow, ask or block.
ON_RESERVED = "edits.on_reserved"
#: How long edits are kept and shown, in minutes.
WINDOW_MINUTES = "edits.window_minutes"
DEFAULT_WINDOW_MINUTES = 30.0
ON_RESERVED_CHOICES = ("allow", "ask", "block")


@attrs.frozen
class EditRow:
    """One recent edit as ``peers``, ``edits`` and ``edits_check`` read it."""

    fingerprint: str  # "" for our own
    label: str
    room_id: str  # "" for our own
    session: str
    repo: str
    path: str
    edited_at: float
    note: str = ""


# --- settings ---------------------------------------------------------------------------------


def rooms_off(conn: sqlite3.Connection) -> set[str]:
    value = get_setting(conn, ROOMS_OFF)
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def set_room_shared(conn: sqlite3.Connection, room_id: str, shared: bool) -> None:
    off = rooms_off(conn)
    if shared:
        off.discard(room_id)
    else:
        off.add(room_id)
    ids: list[JSONValue] = list(sorted(off))
    set_setting(conn, ROOMS_OFF, ids)


def on_reserved(conn: sqlite3.Connection) -> str:
    value = get_setting(conn, ON_RESERVED)
    return value if isinstance(value, str) and value in ON_RESERVED_CHOICES else "allow"


def set_on_reserved(conn: sqlite3.Connection, value: str) -> None:
    set_setting(conn, ON_RESERVED, value)


def window(conn: sqlite3.Connection) -> float:
    """The window in seconds."""
    value = get_setting(conn, WINDOW_MINUTES)
    minutes = DEFAULT_WINDOW_MINUTES
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        minutes = float(value)
    return max(1.0, min(minutes, 24 * 60.0)) * 60.0


def set_window_minutes(conn: sqlite3.Connection, minutes: float) -> None:
    set_setting(conn, WINDOW_MINUTES, minutes)


# --- our own -----------------------------------------------------------------------------------


def own_set(conn: sqlite3.Connection, session: str, repo: str) -> list[EditedPath]:
    """What ``session`` wrote in ``repo`` and we still keep, newest first."""
    rows = conn.execute(
        "SELECT path, edited_at FROM own_edits WHERE session = ? AND repo_key = ? "
        "ORDER BY edited_at DESC, path LIMIT ?",
        (session, repo.casefold(), MAX_EDITED_PATHS),
    ).fetchall()
    return [EditedPath(str(p), float(at)) for p, at in rows]


def replace_own(
    conn: sqlite3.Connection, session: str, repo: str, edits: Sequence[EditedPath], cutoff: float
) -> None:
    """``edits`` become ``session``'s set in ``repo``; every own row before ``cutoff`` goes."""
    conn.execute("DELETE FROM own_edits WHERE edited_at < ?", (cutoff,))
    conn.execute(
        "DELETE FROM own_edits WHERE session = ? AND repo_key = ?", (session, repo.casefold())
    )
    conn.executemany(
        "INSERT INTO own_edits (session, repo, repo_key, path, edited_at) VALUES (?, ?, ?, ?, ?)",
        [(session, repo, repo.casefold(), e.path, e.edited_at) for e in edits],
    )


def own_recent(conn: sqlite3.Connection, since: float) -> list[EditRow]:
    rows = conn.execute(
        "SELECT session, repo, path, edited_at FROM own_edits WHERE edited_at >= ? "
        "ORDER BY edited_at DESC",
        (since,),
    ).fetchall()
    return [EditRow("", "", "", str(s), str(r), str(p), float(at)) for s, r, p, at in rows]


# --- roommates' --------------------------------------------------------------------------------

_LABEL = (
    "COALESCE((SELECT c.label FROM contacts c WHERE c.fingerprint = e.fingerprint), "
    "(SELECT m.label FROM room_members m WHERE m.room_id = e.room_id "
    "AND m.fingerprint = e.fingerprint), e.fingerprint)"
)
_PEER_COLUMNS = (
    f"e.fingerprint, {_LABEL}, e.room_id, e.session, e.repo, e.path, e.edited_at, e.note"
)
_JOINED = "JOIN rooms r ON r.room_id = e.room_id AND r.state = 'joined' AND r.removed_at IS NULL"


def _peer_row(row: tuple[object, ...]) -> EditRow:
    fp, label, room, session, repo, path, at, note = row
    assert isinstance(at, float | int)  # a REAL column
    return EditRow(str(fp), str(label), str(room), str(session), str(repo), str(path),
                   float(at), str(note))


def apply_published(
    conn: sqlite3.Connection, applied: Applied, *, me: str, window_s: float | None = None
) -> None:
    """Applier: a roommate's edits for one session and repository replace what they had
    published for it in this room. Never our own (another of our machines). What the sender
    wrote is bounded here: names and the note are cut, invalid paths dropped, times no later
    than the relay's, at most ``MAX_EDITED_PATHS`` of them within the window."""
    op = applied.op
    if not isinstance(op, EditsPublished) or applied.sender == me:
        return
    keep = window_s if window_s is not None else window(conn)
    conn.execute("DELETE FROM peer_edits WHERE edited_at < ?", (applied.relay_ts - keep,))
    repo, session = op.repo[:MAX_NAME], op.session[:MAX_NAME]
    if not repo or not session:
        return
    conn.execute(
        "DELETE FROM peer_edits WHERE fingerprint = ? AND room_id = ? AND session = ? "
        "AND repo_key = ?",
        (applied.sender, applied.room_id, session, repo.casefold()),
    )
    clamped = [  # a sender's clock is not ours: never later than the relay saw the op
        EditedPath(e.path, min(e.edited_at, applied.relay_ts))
        for e in op.paths[: 4 * MAX_EDITED_PATHS]
    ]
    note = op.note[:MAX_EDIT_NOTE]
    conn.executemany(
        "INSERT INTO peer_edits (fingerprint, room_id, session, repo, repo_key, path, "
        "edited_at, note, published_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (applied.sender, applied.room_id, session, repo, repo.casefold(), e.path,
             e.edited_at, note, applied.relay_ts)
            for e in recent(clamped, applied.relay_ts, keep)
        ],
    )


def peer_edits_on(
    conn: sqlite3.Connection, repo: str, paths: Sequence[str], since: float
) -> list[EditRow]:
    """Roommates' edits of ``paths`` in a repository named ``repo`` (any case) since ``since``,
    from rooms we are still in."""
    found: list[EditRow] = []
    for path in dict.fromkeys(paths):
        rows = conn.execute(
            f"SELECT {_PEER_COLUMNS} FROM peer_edits e {_JOINED} "
            "WHERE e.repo_key = ? AND e.path = ? AND e.edited_at >= ? "
            "ORDER BY e.edited_at DESC LIMIT ?",
            (repo.casefold(), path, since, MAX_EDITED_PATHS),
        ).fetchall()
        found += [_peer_row(r) for r in rows]
    return found


def peer_recent(conn: sqlite3.Connection, since: float) -> list[EditRow]:
    """Every roommate's edits since ``since`` (newest first), each (person, session,
    repository, path) once however many rooms it was told to."""
    rows = conn.execute(
        f"SELECT {_PEER_COLUMNS} FROM peer_edits e {_JOINED} WHERE e.edited_at >= ? "
        "ORDER BY e.edited_at DESC",
        (since,),
    ).fetchall()
    seen: set[tuple[str, str, str, str]] = set()
    out = []
    for row in rows:
        edit = _peer_row(row)
        key = (edit.fingerprint, edit.session, edit.repo.casefold(), edit.path)
        if key not in seen:
            seen.add(key)
            out.append(edit)
    return out


def sharing_inputs(conn: sqlite3.Connection) -> tuple[list[str], list[tuple[str, str]]]:
    """The joined rooms, and ``(room, project)`` of every session roommates published there."""
    joined = [
        str(r[0]) for r in conn.execute(
            "SELECT room_id FROM rooms WHERE state = 'joined' AND removed_at IS NULL "
            "ORDER BY room_id"
        )
    ]
    projects = [
        (str(room), str(project)) for room, project in conn.execute(
            "SELECT DISTINCT room_id, project FROM peer_sessions WHERE project != ''"
        )
    ]
    return joined, projects
