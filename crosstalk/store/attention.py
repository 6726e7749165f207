"""Attention state in ``state.db``: trust settings, timed mutes, ration stamps, the attention
record, and the gate's notices.

Every function takes a connection so it composes inside one ``await store.write(fn)``
transaction: the gate records a notice, its attention entry and (for a drop) the held message's
state all at once, or not at all. The values going in and out are the pure cores' own types
(``TrustSettings``, ``MuteState``, ``AttentionEntry``), so the rules stay in ``crosstalk/core``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence

import attrs

from crosstalk.core.attention import AttentionEntry
from crosstalk.core.levels import Level, TrustSettings
from crosstalk.core.mute import MuteState
from crosstalk.core.triage import Decision, Intent
from crosstalk.store.ids import from_db, to_db

# --- trust -------------------------------------------------------------------------------------


def load_trust(conn: sqlite3.Connection) -> TrustSettings:
    """The receiver's trust settings (the defaults when nothing was set)."""
    settings = TrustSettings()
    rows = conn.execute("SELECT scope, room_id, person, level FROM trust_levels").fetchall()
    for scope, room, person, text in rows:
        level = Level(text)
        if scope == "default":
            settings = settings.with_default(level)
        elif scope == "local":
            settings = attrs.evolve(settings, local=level)
        elif scope == "room":
            settings = settings.with_room(room, level)
        elif scope == "person":
            settings = settings.with_pin(person, level)
        else:
            settings = settings.with_pin(person, level, room=room)
    return settings


def save_trust(conn: sqlite3.Connection, settings: TrustSettings) -> None:
    """Replace the stored trust settings with ``settings``."""
    rows: list[tuple[str, str, str, str]] = [
        ("default", "", "", settings.default.value),
        ("local", "", "", settings.local.value),
    ]
    rows += [("room", room, "", level.value) for room, level in settings.rooms.items()]
    rows += [("person", "", who, level.value) for who, level in settings.people.items()]
    rows += [
        ("room_person", room, who, level.value)
        for room, pins in settings.room_people.items()
        for who, level in pins.items()
    ]
    conn.execute("DELETE FROM trust_levels")
    conn.executemany(
        "INSERT INTO trust_levels (scope, room_id, person, level) VALUES (?, ?, ?, ?)", rows
    )


# --- mutes and the ration ----------------------------------------------------------------------


def load_mutes(conn: sqlite3.Connection) -> MuteState:
    """Every stored timed mute (ended ones included; ``MuteState`` ignores them)."""
    return MuteState({str(k): float(u) for k, u in conn.execute("SELECT key, until FROM mutes")})


def save_mutes(conn: sqlite3.Connection, mutes: MuteState, now: float) -> None:
    """Replace the stored mutes with those of ``mutes`` still in force at ``now``."""
    conn.execute("DELETE FROM mutes")
    conn.executemany(
        "INSERT INTO mutes (key, until) VALUES (?, ?)", sorted(mutes.active(now).items())
    )


def load_ration_stamps(conn: sqlite3.Connection) -> dict[str, list[float]]:
    """Send times per recipient, for ``crosstalk.core.ration.Ration(sent=...)``."""
    stamps: dict[str, list[float]] = {}
    for who, ts in conn.execute("SELECT recipient, sent_at FROM ration_stamps ORDER BY sent_at"):
        stamps.setdefault(str(who), []).append(float(ts))
    return stamps


def save_ration_stamps(conn: sqlite3.Connection, stamps: Mapping[str, Sequence[float]]) -> None:
    """Replace the stored stamps with ``stamps`` (``Ration.stamps()`` after a spend)."""
    conn.execute("DELETE FROM ration_stamps")
    conn.executemany(
        "INSERT INTO ration_stamps (recipient, sent_at) VALUES (?, ?)",
        [(who, ts) for who, times in stamps.items() for ts in times],
    )


# --- the attention record ----------------------------------------------------------------------


def append_attention(conn: sqlite3.Connection, entries: Iterable[AttentionEntry]) -> None:
    conn.executemany(
        "INSERT INTO attention_record (item, source, ts, decision) VALUES (?, ?, ?, ?)",
        [(to_db(e.item), e.source, e.ts, e.decision.value) for e in entries],
    )


def attention_entries(conn: sqlite3.Connection, since: float) -> list[AttentionEntry]:
    """Entries of every item with an entry at or after ``since``, in the order appended.

    An item held since before ``since`` keeps its earlier entries only if it had a later one;
    the caller picks ``since`` far enough back (a day) that anything still held is inside.
    """
    rows = conn.execute(
        "SELECT item, source, ts, decision FROM attention_record WHERE item IN "
        "(SELECT item FROM attention_record WHERE ts >= ?) ORDER BY id",
        (since,),
    ).fetchall()
    return [AttentionEntry(from_db(i), str(s), float(t), Decision(d)) for i, s, t, d in rows]


# --- notices -----------------------------------------------------------------------------------


@attrs.frozen
class Notice:
    """One row of ``notices``: what the gate decided for one message (see the schema), with
    what its held message says (sender, room, intent, kind, target, from_session)."""

    message_id: str
    session: str | None
    target: str | None
    sender: str
    label: str
    from_session: str | None
    room_id: str | None
    intent: Intent
    kind: str
    decision: Decision
    due: str
    created_at: float
    surfaced_at: float | None = None
    batch: str | None = None
    shown_at: float | None = None


def _body(path: str) -> str:
    """A field of the held message's body (NULL when there is none)."""
    return f"CASE WHEN json_valid(h.body) THEN json_extract(h.body, '{path}') END"


#: A notice's own columns and what it says about its message, read from the held message
#: (``h``, which shares only ``message_id`` with ``notices``): since migration 27
#: (store/schema_lean.py) a notice keeps no copy of them. One whose message went (a leave
#: took it) reads the defaults.
_NOTICE_COLUMNS = (
    "notices.message_id, session, h.target_session, coalesce(h.sender, ''), label, "
    f"{_body('$.from_session')}, h.room_id, coalesce(h.intent, 'fyi'), "
    f"coalesce({_body('$.kind')}, 'message'), decision, due, created_at, surfaced_at, "
    "batch, shown_at"
)
_HELD_ROW = "LEFT JOIN held_messages h ON h.message_id = notices.message_id"


def _notice(row: Sequence[object]) -> Notice:
    values = list(row)
    values[0] = from_db(values[0])
    values[7] = Intent(str(values[7]))
    values[9] = Decision(str(values[9]))
    return Notice(*values)  # type: ignore[arg-type]  # column order matches the fields


def add_notice(conn: sqlite3.Connection, notice: Notice) -> None:
    """Record a decision (once: a second row for the same message and session is ignored).

    What it says about the message (sender, room, intent, kind, target, session it came
    from) is the held message's, read from there."""
    conn.execute(
        "INSERT OR IGNORE INTO notices (message_id, session, label, decision, due, "
        "created_at, surfaced_at, batch, shown_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            to_db(notice.message_id), notice.session, notice.label, notice.decision.value,
            notice.due, notice.created_at, notice.surfaced_at, notice.batch, notice.shown_at,
        ),
    )


def has_notice(conn: sqlite3.Connection, message_id: str) -> bool:
    """Whether the gate already decided ``message_id``."""
    row = conn.execute(
        "SELECT 1 FROM notices WHERE message_id = ?", (to_db(message_id),)
    ).fetchone()
    return row is not None


_HELD = tuple(d.value for d in Decision if d.holds)
_FOR_SESSION = (
    "(session = :name OR (session IS NULL AND (h.target_session IS NULL "
    "OR h.target_session = :name OR h.target_session = :project)))"
)


def held_notices(
    conn: sqlite3.Connection, session: str | None = None, project: str = ""
) -> list[Notice]:
    """Held notices not yet surfaced nor withdrawn, oldest first: all, or those for one session.

    A session's own notices are those addressed to it by name, plus those for any session whose
    target is its name, its project, or nobody in particular. The scan is pinned to the partial
    index of held notices (``notices_held``): left to itself the planner took
    ``notices_waiting (surfaced_at IS NULL)`` (gone since migration 26), which also held every
    notice read, dropped or refused without surfacing, so its cost grew with history.
    """
    params: dict[str, object] = {f"d{n}": d for n, d in enumerate(_HELD)}
    where = _HELD_NOW
    if session is not None:
        where += " AND " + _FOR_SESSION
        params.update(name=session, project=project)
    rows = conn.execute(
        f"SELECT {_NOTICE_COLUMNS} FROM notices INDEXED BY notices_held {_HELD_ROW} "
        f"WHERE {where} ORDER BY created_at, id",
        params,
    ).fetchall()
    return [_notice(r) for r in rows]


def count_held(conn: sqlite3.Connection) -> int:
    """How many messages wait now: held by the gate (for an idle session, or a timed mute)
    and not yet surfaced, read, answered or withdrawn. Not the record's held entries, which
    keep every hold of the day, long after the message was read."""
    params: dict[str, object] = {f"d{n}": d for n, d in enumerate(_HELD)}
    row = conn.execute(
        "SELECT count(DISTINCT notices.message_id) FROM notices INDEXED BY notices_held "
        f"WHERE {_HELD_NOW}",
        params,
    ).fetchone()
    return int(row[0])


_HELD_NOW = (
    "surfaced_at IS NULL AND withdrawn_at IS NULL AND decision IN (:d0, :d1, :d2)"
)
_QUIET_ASK = "(decision = :quiet AND coalesce(h.intent, 'fyi') <> :fyi)"


def _marks(prefix: str, values: Sequence[str], params: dict[str, object]) -> str:
    """``(:p0, :p1, ...)`` for ``values``, added to ``params``; ``()`` (SQLite: matches nothing)
    when there are none."""
    names = []
    for n, value in enumerate(values):
        params[f"{prefix}{n}"] = value
        names.append(f":{prefix}{n}")
    return "(" + ", ".join(names) + ")"


def releasable_notices(
    conn: sqlite3.Connection,
    live: Sequence[tuple[str, str]],
    turned: tuple[str, str] | None = None,
) -> list[Notice]:
    """The held notices a release could surface now, oldest first: what the gate looks at.

    ``live`` are the live sessions as ``(name, project)``. A held notice surfaces against the
    status of the session that would take it (:func:`crosstalk.core.gate_routing.claimant`), so
    one that no live session could take stays held unless it is a quiet hold of a question
    (released by a mute's end whatever the status); those are all this skips. With ``turned``
    (the ``(name, project)`` of a session whose status just changed) it narrows further to what
    that session could take: notices routed to it, and parked ones (their session gone, or
    none) whose target is that session, its project or anyone. The scan runs over the partial
    index of held notices (``notices_held``, pinned as in :func:`held_notices`), so it costs
    what is pending, never history.
    """
    params: dict[str, object] = {f"d{n}": d for n, d in enumerate(_HELD)}
    params.update(quiet=Decision.HOLD_QUIET.value, fyi=Intent.FYI.value)
    names = _marks("n", [name for name, _ in live], params)
    if turned is None:
        keys = _marks("k", sorted({k for pair in live for k in pair if k}), params)
        claimable = (
            f"(session IN {names} OR h.target_session IS NULL "
            f"OR h.target_session IN {keys})"
        )
    else:
        params.update(name=turned[0], project=turned[1])
        claimable = (
            f"(session = :name OR ((session IS NULL OR session NOT IN {names}) AND "
            "(h.target_session IS NULL OR h.target_session = :name "
            "OR h.target_session = :project)))"
        )
    rows = conn.execute(
        f"SELECT {_NOTICE_COLUMNS} FROM notices INDEXED BY notices_held {_HELD_ROW} "
        f"WHERE {_HELD_NOW} AND ({claimable} OR {_QUIET_ASK}) ORDER BY created_at, id",
        params,
    ).fetchall()
    return [_notice(r) for r in rows]


def quiet_held_sources(conn: sqlite3.Connection) -> list[tuple[str, str | None]]:
    """The distinct ``(sender, room_id)`` of notices held by a timed mute and not yet surfaced
    (what a mute's end could release); over the partial index of held notices."""
    rows = conn.execute(
        "SELECT DISTINCT coalesce(h.sender, ''), h.room_id FROM notices "
        f"INDEXED BY notices_held {_HELD_ROW} "
        "WHERE surfaced_at IS NULL AND withdrawn_at IS NULL AND decision = ?",
        (Decision.HOLD_QUIET.value,),
    ).fetchall()
    return [(str(sender), None if room is None else str(room)) for sender, room in rows]


def mark_surfaced(
    conn: sqlite3.Connection, message_id: str, session: str | None, batch: str, now: float
) -> None:
    """A held notice surfaced at ``now`` to ``session``: the claimant the gate chose, which is
    the routed session while it lives, else the next matching one, or None for any match."""
    conn.execute(
        "UPDATE notices SET surfaced_at = ?, batch = ?, session = ? "
        "WHERE message_id = ? AND surfaced_at IS NULL",
        (now, batch, session, to_db(message_id)),
    )


def mark_shown(
    conn: sqlite3.Connection, message_ids: Sequence[str], session: str, now: float
) -> int:
    """A session showed these surfaced notices (the hook or inbox did); returns how many."""
    changed = 0
    for message_id in message_ids:
        changed += conn.execute(
            "UPDATE notices SET shown_at = ?, session = coalesce(session, ?) "
            "WHERE message_id = ? AND surfaced_at IS NOT NULL AND shown_at IS NULL",
            (now, session, to_db(message_id)),
        ).rowcount
    return changed


def list_notices(
    conn: sqlite3.Connection,
    session: str | None = None,
    project: str = "",
    *,
    current: bool = False,
    pending: bool = False,
) -> list[Notice]:
    """Every notice (or those for one session), oldest first; ``current``: not withdrawn (its
    message is still unread and its ask still open); ``pending``: current, surfaced and not yet
    shown (what a hook may show now; found through the ``notices_to_show`` partial index, so its
    cost is what is pending, not the history)."""
    where, params = "1", dict[str, object]()
    if session is not None:
        where, params = _FOR_SESSION, {"name": session, "project": project}
    if current or pending:
        where += " AND withdrawn_at IS NULL"
    if pending:
        where += " AND surfaced_at IS NOT NULL AND shown_at IS NULL"
    rows = conn.execute(
        f"SELECT {_NOTICE_COLUMNS} FROM notices {_HELD_ROW} WHERE {where} "
        "ORDER BY created_at, id", params
    ).fetchall()
    return [_notice(r) for r in rows]
