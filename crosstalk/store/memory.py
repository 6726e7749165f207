"""Room memory in ``state.db``: each room's facts, tasks, decisions and outcomes, and its cursor.

Why rows of canonical JSON, not a column per field and not one blob per room: the records are the
wire models of :mod:`crosstalk.wire.memory`, nested (confirmations, revisions), and the state is
rebuilt with ``MemoryState.from_snapshot`` anyway. One blob per room would make applying one op
rewrite the whole memory (10,000 facts: megabytes per op); one row per record makes an op cost one
or two row writes, and loading a room is one query per table. The records are stored exactly as
:func:`~crosstalk.core.memory.canonical_bytes` would write them, so a loaded state hashes the same.

Every function takes a connection inside a transaction the caller owns (``Store.write`` or the
room actor's apply transaction), so a record, its outcome and the cursor commit together.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

import attrs

from crosstalk.core.memory import MemoryState
from crosstalk.errors import DamagedState, RemoteProtocolError
from crosstalk.wire.converter import converter
from crosstalk.wire.memory import (
    DecisionMade,
    DecisionRecord,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    FactRecord,
    MemoryOp,
    MemorySnapshot,
    Outcome,
    TaskRecord,
)
from crosstalk.wire.reservations import (
    ReleaseOp,
    RenewOp,
    Reservation,
    ReservationOutcome,
    ReservationSnapshot,
    ReserveOp,
)
from crosstalk.wire.room_ops import MemoryEnvelope, Rekey, decode_op, encode_op

#: The one "record" a reservation op touches: the room's reservation book, written whole.
BOOK = ("reservations", "")

# One encoder for every row, built once. ``JSONEncoder.encode`` builds a new C encoder
# (``c_make_encoder``) on every call: a fifth of encoding a catch-up's record (~1 of ~5 µs).
# Same settings: sorted keys, no spaces, ASCII escapes; no circular-reference check (rows are
# trees of plain values). The same text (tests/store/test_memory_store.py compares the two).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# The arguments are JSONEncoder.iterencode's; typeshed leaves the C function out, hence getattr.
_MAKE_C_ENCODER: Any = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE: Any = None if _MAKE_C_ENCODER is None else _MAKE_C_ENCODER(
    None, _ENCODER.default, _quote, None, ":", ",", True, False, True
)


def _dumps(value: Any) -> str:
    data = converter.unstructure(value)
    if _C_ENCODE is None:  # an interpreter without the _json accelerator
        return _ENCODER.encode(data)
    return "".join(_C_ENCODE(data, 0))


def outcome_body(outcome: Outcome) -> str:
    """``_dumps(outcome)``, written out by hand: a catch-up stores one outcome per op, and the
    general path (unstructure, then the generic encoder) is most of that row's cost for
    74 bytes of JSON. The same text, key for key (tests/store/test_memory_store.py compares the
    two over every code, with and without a winner, and fails when Outcome gains a field)."""
    winner = outcome.winner
    who = "null" if winner is None else (
        f'{{"fingerprint":{_quote(winner.fingerprint)},"label":{_quote(winner.label)}}}'
    )
    return (
        f'{{"code":{_quote(outcome.code.value)},'
        f'"duplicate":{"true" if outcome.duplicate else "false"},'
        f'"op_id":{_quote(outcome.op_id)},"seq":{int(outcome.seq)},"winner":{who}}}'
    )


@attrs.frozen
class MemoryCursor:
    """Where a room's memory stands (see ``memory_rooms`` in schema_memory.py)."""

    room_id: str
    last_seq: int = 0
    hole_from: int | None = None
    request_id: str | None = None
    asked: str | None = None
    requested_at: float | None = None
    conceded: bool = False
    journal_from: int | None = None


_CURSOR = "last_seq, hole_from, request_id, asked, requested_at, conceded, journal_from"


def _cursor(room_id: str, row: tuple[Any, ...]) -> MemoryCursor:
    last_seq, hole_from, request_id, asked, requested_at, conceded, journal_from = row
    return MemoryCursor(
        room_id, last_seq, hole_from, request_id, asked, requested_at, bool(conceded), journal_from
    )


def cursor(conn: sqlite3.Connection, room_id: str) -> MemoryCursor:
    """The room's memory cursor (all zero for a room with no memory yet)."""
    row = conn.execute(
        f"SELECT {_CURSOR} FROM memory_rooms WHERE room_id = ?", (room_id,)
    ).fetchone()
    return MemoryCursor(room_id) if row is None else _cursor(room_id, row)


# Rooms we are in now: asking (or answering) for one we were removed from is refused by the
# relay, and an ask's history there must not count once we are back (sim seed 7366: rounds
# "heard" before the removal let a rejoined member give its hole up without asking anyone).
_IN_ROOM = ("room_id IN (SELECT room_id FROM rooms WHERE state = 'joined' "
            "AND removed_at IS NULL)")


def rooms_in(conn: sqlite3.Connection) -> list[str]:
    """The rooms we are in now: joined, and not removed since (sim seed 8678: a room we were
    removed from and rejoined stayed "probed", so the ops of the time away never came)."""
    rows = conn.execute(f"SELECT room_id FROM rooms WHERE {_IN_ROOM} ORDER BY room_id")
    return [row[0] for row in rows]


def stalled_rooms(conn: sqlite3.Connection) -> list[MemoryCursor]:
    """Rooms we are in that wait for a snapshot, oldest hole first."""
    rows = conn.execute(
        f"SELECT room_id, {_CURSOR} FROM memory_rooms WHERE hole_from IS NOT NULL "
        f"AND {_IN_ROOM} ORDER BY room_id"
    ).fetchall()
    return [_cursor(row[0], row[1:]) for row in rows]


def repairing_rooms(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """``(room, ops journaled)`` of rooms whose memory gave a hole up and keeps a journal to
    install a complete member's snapshot under (no hole open now)."""
    rows = conn.execute(
        "SELECT r.room_id, (SELECT count(*) FROM memory_pending p WHERE p.room_id = r.room_id) "
        "FROM memory_rooms r WHERE r.hole_from IS NULL AND r.conceded = 1 "
        f"AND r.journal_from IS NOT NULL AND {_IN_ROOM} ORDER BY r.room_id"
    ).fetchall()
    return [(str(room), int(count)) for room, count in rows]


def journal_from(conn: sqlite3.Connection, room_id: str) -> int | None:
    """The seq from which the room keeps every op in its repair journal (None: no journal)."""
    row = conn.execute(
        "SELECT journal_from FROM memory_rooms WHERE room_id = ?", (room_id,)
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def set_conceded(
    conn: sqlite3.Connection, room_id: str, conceded: bool, journal_from: int | None
) -> None:
    """Record whether the memory lacks ops it gave up, and from which seq it keeps a journal."""
    _ensure(conn, room_id)
    conn.execute(
        "UPDATE memory_rooms SET conceded = ?, journal_from = ? WHERE room_id = ?",
        (int(conceded), journal_from, room_id),
    )


def drop_journal(conn: sqlite3.Connection, room_id: str) -> None:
    """Stop keeping the journal (the memory stays conceded; it can no longer be repaired)."""
    dropped = conn.execute(
        "UPDATE memory_rooms SET journal_from = NULL "
        "WHERE room_id = ? AND journal_from IS NOT NULL AND hole_from IS NULL",
        (room_id,),
    ).rowcount
    if dropped:  # with a hole, memory_pending holds the ops parked behind it
        conn.execute("DELETE FROM memory_pending WHERE room_id = ?", (room_id,))


def _ensure(conn: sqlite3.Connection, room_id: str) -> None:
    conn.execute("INSERT OR IGNORE INTO memory_rooms (room_id) VALUES (?)", (room_id,))


def set_last_seq(conn: sqlite3.Connection, room_id: str, seq: int) -> None:
    conn.execute(
        "INSERT INTO memory_rooms (room_id, last_seq) VALUES (?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET last_seq = excluded.last_seq",
        (room_id, seq),
    )


def set_hole(conn: sqlite3.Connection, room_id: str, hole_from: int | None) -> None:
    """Mark (or, with None, clear) a hole; clearing also closes the open request.

    A new hole ends a repair journal: the ops parked behind a hole and a journal share
    memory_pending, and the snapshot that fills the hole decides anew whether memory is complete.
    """
    _ensure(conn, room_id)
    conn.execute("UPDATE memory_rooms SET hole_from = ? WHERE room_id = ?", (hole_from, room_id))
    if hole_from is None:
        set_request(conn, room_id, None, None, None)
        return
    ended = conn.execute(
        "UPDATE memory_rooms SET journal_from = NULL "
        "WHERE room_id = ? AND journal_from IS NOT NULL",
        (room_id,),
    ).rowcount
    if ended:
        conn.execute(
            "DELETE FROM memory_pending WHERE room_id = ? AND seq < ?", (room_id, hole_from)
        )


def set_request(
    conn: sqlite3.Connection,
    room_id: str,
    request_id: str | None,
    asked: str | None,
    at: float | None,
) -> None:
    _ensure(conn, room_id)
    conn.execute(
        "UPDATE memory_rooms SET request_id = ?, asked = ?, requested_at = ? WHERE room_id = ?",
        (request_id, asked, at, room_id),
    )


# --- the state ---------------------------------------------------------------------------------


def _records(conn: sqlite3.Connection, room_id: str, kind: str, cls: type[Any]) -> tuple[Any, ...]:
    rows = conn.execute(
        "SELECT body FROM memory_records WHERE room_id = ? AND kind = ? ORDER BY record_id",
        (room_id, kind),
    ).fetchall()
    return tuple(converter.structure(json.loads(r[0]), cls) for r in rows)


def record_ids(conn: sqlite3.Connection, room_id: str, kind: str, prefix: str) -> list[str]:
    """The ids of the room's records of ``kind`` that start with ``prefix``."""
    rows = conn.execute(
        "SELECT record_id FROM memory_records WHERE room_id = ? AND kind = ? "
        "AND substr(record_id, 1, ?) = ?",
        (room_id, kind, len(prefix), prefix),
    ).fetchall()
    return [str(r[0]) for r in rows]


def load_snapshot(conn: sqlite3.Connection, room_id: str) -> MemorySnapshot:
    """The room's memory as a snapshot, as of its memory cursor.

    Raises:
        DamagedState: a stored record does not parse (the database was changed behind our back).
    """
    try:
        outcomes = conn.execute(
            "SELECT body FROM memory_outcomes WHERE room_id = ? ORDER BY seq, op_id", (room_id,)
        ).fetchall()
        return MemorySnapshot(
            room_id=room_id,
            last_seq=cursor(conn, room_id).last_seq,
            facts=_records(conn, room_id, "fact", FactRecord),
            tasks=_records(conn, room_id, "task", TaskRecord),
            decisions=_records(conn, room_id, "decision", DecisionRecord),
            outcomes=tuple(converter.structure(json.loads(r[0]), Outcome) for r in outcomes),
            reservations=_load_book(conn, room_id),
        )
    except (ValueError, TypeError, KeyError) as exc:
        problem = f"the memory of room {room_id} in state.db does not parse: {exc}"
        raise DamagedState(problem) from None


def _load_book(conn: sqlite3.Connection, room_id: str) -> ReservationSnapshot | None:
    book = conn.execute(
        "SELECT last_seq, clock FROM reservation_books WHERE room_id = ?", (room_id,)
    ).fetchone()
    if book is None:
        return None
    held = conn.execute(
        "SELECT body FROM reservation_held WHERE room_id = ? ORDER BY reservation_id", (room_id,)
    ).fetchall()
    outcomes = conn.execute(
        "SELECT body FROM reservation_outcomes WHERE room_id = ? ORDER BY seq, op_id", (room_id,)
    ).fetchall()
    return ReservationSnapshot(
        room_id=room_id,
        last_seq=int(book[0]),
        clock=float(book[1]),
        reservations=tuple(converter.structure(json.loads(r[0]), Reservation) for r in held),
        outcomes=tuple(
            converter.structure(json.loads(r[0]), ReservationOutcome) for r in outcomes
        ),
    )


def _save_book(conn: sqlite3.Connection, state: MemoryState, op_ids: Iterable[str]) -> None:
    """Write the room's reservation book: where it stands, what holds (rewritten whole: a lapse
    or a departure can end many at once), and the outcomes of ``op_ids``."""
    room, book = state.room_id, state.reservations
    conn.execute(
        "INSERT INTO reservation_books (room_id, last_seq, clock) VALUES (?, ?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET last_seq = excluded.last_seq, clock = excluded.clock",
        (room, book.last_seq, book.clock),
    )
    conn.execute("DELETE FROM reservation_held WHERE room_id = ?", (room,))
    conn.executemany(
        "INSERT INTO reservation_held (room_id, reservation_id, body) VALUES (?, ?, ?)",
        [(room, r.reservation_id, _dumps(r)) for r in book.snapshot().reservations],
    )
    rows = []
    for op_id in op_ids:
        outcome = book.outcome_of(op_id)
        if outcome is not None:
            rows.append((room, op_id, outcome.seq, _dumps(outcome)))
    conn.executemany(
        "INSERT OR IGNORE INTO reservation_outcomes (room_id, op_id, seq, body) "
        "VALUES (?, ?, ?, ?)",
        rows,
    )


def load_state(conn: sqlite3.Connection, room_id: str) -> MemoryState:
    """The room's :class:`MemoryState`, rebuilt from its rows."""
    try:
        return MemoryState.from_snapshot(load_snapshot(conn, room_id))
    except RemoteProtocolError as exc:
        problem = f"the memory of room {room_id} in state.db is inconsistent: {exc}"
        raise DamagedState(problem) from None


# Tuples made once, not unions written in the call: those are built at every call and checked
# more slowly (0.64 -> 0.24 µs a call on Python 3.11), and this runs once per op of a catch-up.
_FACT_OPS = (FactAdd, FactConfirm, FactCorrect, FactForget)
_BOOK_OPS = (ReserveOp, RenewOp, ReleaseOp)


def touched(op: MemoryOp) -> tuple[str, str]:
    """The ``(kind, record_id)`` of the record that applying ``op`` may change."""
    if isinstance(op, _FACT_OPS):
        return "fact", op.fact_id
    if isinstance(op, DecisionMade):
        return "decision", op.decision_id
    if isinstance(op, _BOOK_OPS):
        return BOOK
    return "task", op.task_id


def _record(
    state: MemoryState, kind: str, record_id: str
) -> FactRecord | TaskRecord | DecisionRecord | None:
    if kind == "fact":
        return state.fact(record_id)
    if kind == "task":
        return state.task(record_id)
    return state.decision(record_id)


def save_applied(conn: sqlite3.Connection, state: MemoryState, op: MemoryOp, op_id: str) -> None:
    """Write what applying ``op`` changed: its record, its outcome and the cursor."""
    save_batch(conn, state, [touched(op)], [op_id])


def save_batch(
    conn: sqlite3.Connection,
    state: MemoryState,
    records: Iterable[tuple[str, str]],
    op_ids: Iterable[str],
) -> None:
    """Write what applying several ops changed: each touched record once (as it is now in
    ``state``), each op's outcome, and the cursor once. The rows are those that writing after
    every op would have left."""
    room = state.room_id
    rows = []
    op_ids = list(op_ids)
    for kind, record_id in records:
        if (kind, record_id) == BOOK:
            _save_book(conn, state, op_ids)
            continue
        record = _record(state, kind, record_id)
        if record is not None:
            rows.append((room, kind, record_id, _dumps(record)))
    conn.executemany(
        "INSERT INTO memory_records (room_id, kind, record_id, body) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (room_id, kind, record_id) DO UPDATE SET body = excluded.body",
        rows,
    )
    outcomes = []
    for op_id in op_ids:
        outcome = state.outcome_of(op_id)
        if outcome is not None:
            if outcome.duplicate:
                outcome = attrs.evolve(outcome, duplicate=False)
            outcomes.append((room, op_id, outcome.seq, outcome_body(outcome)))
    conn.executemany(
        "INSERT OR IGNORE INTO memory_outcomes (room_id, op_id, seq, body) VALUES (?, ?, ?, ?)",
        outcomes,
    )
    set_last_seq(conn, room, state.last_seq)


def replace_all(conn: sqlite3.Connection, state: MemoryState) -> None:
    """Replace the room's stored memory with ``state`` (after installing a snapshot)."""
    room = state.room_id
    snapshot = state.snapshot()
    conn.execute("DELETE FROM memory_records WHERE room_id = ?", (room,))
    conn.execute("DELETE FROM memory_outcomes WHERE room_id = ?", (room,))
    for table in ("reservation_books", "reservation_held", "reservation_outcomes"):
        conn.execute(f"DELETE FROM {table} WHERE room_id = ?", (room,))
    if snapshot.reservations is not None:
        _save_book(conn, state, (o.op_id for o in snapshot.reservations.outcomes))
    rows = [(room, "fact", f.fact_id, _dumps(f)) for f in snapshot.facts]
    rows += [(room, "task", t.task_id, _dumps(t)) for t in snapshot.tasks]
    rows += [(room, "decision", d.decision_id, _dumps(d)) for d in snapshot.decisions]
    conn.executemany(
        "INSERT INTO memory_records (room_id, kind, record_id, body) VALUES (?, ?, ?, ?)", rows
    )
    conn.executemany(
        "INSERT INTO memory_outcomes (room_id, op_id, seq, body) VALUES (?, ?, ?, ?)",
        [(room, o.op_id, o.seq, outcome_body(o)) for o in snapshot.outcomes],
    )
    set_last_seq(conn, room, state.last_seq)


def outcome(conn: sqlite3.Connection, room_id: str, op_id: str) -> Outcome | None:
    """The recorded outcome of one applied op, or None if it is not applied here yet."""
    row = conn.execute(
        "SELECT body FROM memory_outcomes WHERE room_id = ? AND op_id = ?", (room_id, op_id)
    ).fetchone()
    return None if row is None else converter.structure(json.loads(row[0]), Outcome)


# --- our own ops -------------------------------------------------------------------------------


def record_sent(
    conn: sqlite3.Connection, room_id: str, op_id: str, envelope: MemoryEnvelope, now: float
) -> None:
    """Keep the plaintext of a memory op we are sending (before it is queued)."""
    kind = type(envelope.op).__name__
    conn.execute(
        "INSERT OR IGNORE INTO memory_sent (op_id, room_id, kind, body, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (op_id, room_id, kind, encode_op(envelope).decode(), now),
    )


def record_sent_removal(conn: sqlite3.Connection, room_id: str, op_id: str, op: Rekey) -> None:
    """Keep whom our own rekey removed: the relay never echoes it, and memory applies it at its
    seq (the removed member's reservations lapse there). Kept while the room is (a snapshot
    installed below its seq applies it again); it has no outcome to report."""
    conn.execute(
        "INSERT OR IGNORE INTO memory_sent (op_id, room_id, kind, body, created_at) "
        "VALUES (?, ?, 'Rekey', ?, 0)",
        (op_id, room_id, encode_op(Rekey(op.epoch, op.removed, {})).decode()),
    )


def sent_envelope(conn: sqlite3.Connection, op_id: str) -> MemoryEnvelope | Rekey | None:
    row = conn.execute("SELECT body FROM memory_sent WHERE op_id = ?", (op_id,)).fetchone()
    return None if row is None else parse_envelope(row[0])


def parse_envelope(body: str) -> MemoryEnvelope | Rekey:
    """A parked op: a memory op, or a removal (whose reservations lapse at its seq)."""
    op = decode_op(body.encode())
    if not isinstance(op, MemoryEnvelope | Rekey):
        raise DamagedState("a stored memory op is not a memory op")
    return op


@attrs.frozen
class OwnOp:
    """One of our own ops the relay sequenced: its id and the relay's time for it (0: unknown)."""

    op_id: str
    relay_ts: float


def own_op_at(conn: sqlite3.Connection, room_id: str, seq: int) -> OwnOp | None:
    """Our own op the relay sequenced at ``seq`` in this room, if it is ours."""
    row = conn.execute(
        "SELECT op_id, relay_ts FROM outbox WHERE room_id = ? AND seq = ? AND state = 'sent'",
        (room_id, seq),
    ).fetchone()
    return None if row is None else OwnOp(str(row[0]), float(row[1]))


def own_ops_from(conn: sqlite3.Connection, room_id: str, seq: int) -> dict[int, OwnOp]:
    """Our own ops the relay sequenced in this room after ``seq``, by seq."""
    rows = conn.execute(
        "SELECT seq, op_id, relay_ts FROM outbox WHERE room_id = ? AND seq > ? AND state = 'sent'",
        (room_id, seq),
    ).fetchall()
    return {int(r[0]): OwnOp(str(r[1]), float(r[2])) for r in rows}


def own_ops_after(conn: sqlite3.Connection, room_id: str, seq: int) -> int | None:
    """The highest seq of our own sequenced ops after ``seq``, if any."""
    row = conn.execute(
        "SELECT max(seq) FROM outbox WHERE room_id = ? AND seq > ? AND state = 'sent'",
        (room_id, seq),
    ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def first_parked(conn: sqlite3.Connection, room_id: str) -> int | None:
    """The lowest seq parked behind the room's memory hole, if any."""
    row = conn.execute(
        "SELECT min(seq) FROM memory_pending WHERE room_id = ?", (room_id,)
    ).fetchone()
    return None if row[0] is None else int(row[0])


def inbound_at(conn: sqlite3.Connection, room_id: str, seq: int) -> bool | None:
    """None if the relay link holds no op at ``seq``; else whether the room already applied it."""
    row = conn.execute(
        "SELECT 1 FROM relay_inbound WHERE room_id = ? AND seq = ?", (room_id, seq)
    ).fetchone()
    if row is None:
        return None
    applied = conn.execute(
        "SELECT seq FROM room_cursors WHERE room_id = ?", (room_id,)
    ).fetchone()
    return applied is not None and int(applied[0]) >= seq


def unreported_sent(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    """``(room, op_id, kind)`` of our memory ops in the outbox whose outcome is not reported yet.

    An op the relay refused for good has left the outbox and will never be sequenced: it is not
    listed (nobody waits for it).
    """
    rows = conn.execute(
        "SELECT s.room_id, s.op_id, s.kind FROM memory_sent s JOIN outbox o ON o.op_id = s.op_id "
        "WHERE s.kind != 'Rekey' ORDER BY s.created_at"
    ).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def mark_reported(conn: sqlite3.Connection, op_id: str) -> None:
    """The op's outcome is applied and reported: its plaintext is no longer needed."""
    conn.execute("DELETE FROM memory_sent WHERE op_id = ?", (op_id,))
