"""Room memory applied in batches (the room actor's apply scope) leaves exactly the rows that
applying one op at a time leaves: records, outcomes, cursor, holes and parked ops."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk import crypto
from crosstalk.core.room import Applied
from crosstalk.store import memory as m
from crosstalk.store.db import connect
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire.memory import (
    DecisionMade,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskRelease,
)
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp, RoomOp

ROOM = "room-1"
ANA = crypto.Keys(b"a" * 32, b"A" * 32)  # us
BEN = crypto.Keys(b"b" * 32, b"B" * 32)
CAT = crypto.Keys(b"c" * 32, b"C" * 32)
TABLES = ("memory_records", "memory_outcomes", "memory_rooms", "memory_pending")


def _env(op: MemoryOp, label: str, seq: int) -> MemoryEnvelope:
    return MemoryEnvelope(op, at=100.0 + seq, label=label)


# seq -> (op id, sender, op); our own ops (ANA) reach memory through the outbox, never inbound.
LOG: dict[int, tuple[str, crypto.Keys, RoomOp | None]] = {
    1: ("o1", BEN, _env(FactAdd("f1", "the api retries"), "ben", 1)),
    2: ("o2", ANA, _env(FactConfirm("f1"), "ana", 2)),
    3: ("o3", CAT, _env(TaskAdd("t1", "ship it"), "cat", 3)),
    4: ("o4", BEN, _env(TaskClaim("t1"), "ben", 4)),
    5: ("o5", CAT, _env(TaskClaim("t1"), "cat", 5)),  # loses: ben claimed first
    6: ("o6", BEN, MessageOp(msg_id="o6", text="hi")),
    7: ("o7", ANA, _env(FactCorrect("f1", "the api retries twice", "measured"), "ana", 7)),
    8: ("o8", BEN, None),  # did not open: still a seq of the log
    9: ("o4", BEN, _env(TaskClaim("t1"), "ben", 4)),  # the relay sequenced a retry again
    10: ("o10", BEN, _env(TaskRelease("t1"), "ben", 10)),
    11: ("o11", CAT, _env(TaskClaim("t1"), "cat", 11)),
    12: ("o12", CAT, _env(TaskDone("t1", "done"), "cat", 12)),
    13: ("o13", ANA, _env(DecisionMade("d1", "use sqlite", "it is there", "repo"), "ana", 13)),
    14: ("o14", BEN, _env(FactForget("f1"), "ben", 14)),
    15: ("o15", CAT, _env(FactAdd("f2", "a second fact"), "cat", 15)),
}


def _open(path: Path) -> sqlite3.Connection:
    conn = connect(path)
    conn.execute("BEGIN")
    add_room(conn, Room(ROOM, "team", "shared", "joined", 0, 0.0), b"k" * 32)
    for keys, label in ((ANA, "ana"), (BEN, "ben"), (CAT, "cat")):
        add_member(conn, RoomMember(ROOM, keys.fingerprint, label, keys.ed_pub, keys.x_pub))
    for seq, (op_id, sender, op) in LOG.items():
        if sender is ANA:
            assert isinstance(op, MemoryEnvelope)
            m.record_sent(conn, ROOM, op_id, op, 0.0)
            conn.execute(
                "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
                "VALUES (?, ?, x'00', 'sent', ?, 0)",
                (op_id, ROOM, seq),
            )
    conn.execute("COMMIT")
    return conn


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    one, other = _open(tmp_path / "one.db"), _open(tmp_path / "other.db")
    yield one, other
    one.close()
    other.close()


def _inbound(seqs: list[int]) -> list[Applied]:
    return [
        Applied(ROOM, seq, LOG[seq][0], LOG[seq][1].fingerprint, 1000.0 + seq, LOG[seq][2])
        for seq in seqs
        if LOG[seq][1] is not ANA
    ]


def _one_by_one(conn: sqlite3.Connection, entries: list[Applied]) -> None:
    follower = MemoryFollower(ANA.fingerprint)
    for entry in entries:
        conn.execute("BEGIN")
        follower.applied(conn, entry)
        conn.execute("COMMIT")


def _batched(conn: sqlite3.Connection, entries: list[Applied], size: int) -> MemoryFollower:
    follower = MemoryFollower(ANA.fingerprint)
    for first in range(0, len(entries), size):
        conn.execute("BEGIN")
        with follower.batch(conn):
            for entry in entries[first : first + size]:
                follower.applied(conn, entry)
        conn.execute("COMMIT")
    return follower


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}


@pytest.mark.parametrize("size", [1, 2, 5, 100])
def test_batches_leave_the_rows_one_op_at_a_time_leaves(
    two: tuple[sqlite3.Connection, sqlite3.Connection], size: int
) -> None:
    """Every batch size gives the same records, outcomes (one claim winner) and cursor."""
    one, other = two
    entries = _inbound(list(LOG))
    _one_by_one(one, entries)
    _batched(other, entries, size)
    assert _rows(other) == _rows(one)
    state = m.load_state(other, ROOM)
    assert state.last_seq == 15
    lost = m.outcome(other, ROOM, "o5")
    assert lost is not None and lost.winner is not None
    assert lost.winner.fingerprint == BEN.fingerprint
    assert [f.fact_id for f in state.facts()] == ["f2"]


@pytest.mark.parametrize("size", [2, 100])
def test_a_hole_inside_a_batch_is_marked_and_later_ops_parked(
    two: tuple[sqlite3.Connection, sqlite3.Connection], size: int
) -> None:
    """Ops 4-5 never arrive: the batch marks the hole at 4 and parks 9 on, as one by one does."""
    one, other = two
    entries = _inbound([1, 3, 9, 10, 11, 12])
    _one_by_one(one, entries)
    _batched(other, entries, size)
    assert _rows(other) == _rows(one)
    assert m.cursor(other, ROOM).hole_from == 4
    parked = other.execute("SELECT seq FROM memory_pending ORDER BY seq").fetchall()
    assert [r[0] for r in parked] == [9, 10, 11, 12]


def test_a_batch_that_fails_is_rolled_back_and_applied_again_from_the_store(
    two: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    """An applier error inside the batch rolls it back; the follower forgets the state it had
    advanced in memory, so applying the batch again gives the one-by-one rows."""
    one, other = two
    entries = _inbound(list(LOG))
    _one_by_one(one, entries)
    follower = _batched(other, entries[:3], 3)
    other.execute("BEGIN")
    with pytest.raises(RuntimeError), follower.batch(other):
        for entry in entries[3:6]:
            follower.applied(other, entry)
        raise RuntimeError("another applier failed")
    other.execute("ROLLBACK")
    for first in range(3, len(entries), 4):
        other.execute("BEGIN")
        with follower.batch(other):
            for entry in entries[first : first + 4]:
                follower.applied(other, entry)
        other.execute("COMMIT")
    assert _rows(other) == _rows(one)
