"""Repairing a memory that gave a hole up: the journal, and a complete member's snapshot under it
(crosstalk/store/memory_log.py, "Repair"; sim seed 146)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from crosstalk.core.memory import MemoryState
from crosstalk.features.memory.views import list_memory
from crosstalk.store import memory as m
from crosstalk.store.membership import mark_removed
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.room_keys import reopen_room
from crosstalk.store.rooms import Room
from crosstalk.wire.memory import FactAdd, TaskAdd, TaskClaim
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp
from tests.store.test_memory_store import (
    ANA,
    BEN,
    ROOM,
    env,
    inbound,
    replica,
    room_db,
    sent,
    snapshot_chunks,
)

Log = list[tuple[int, str, str, MemoryEnvelope | None]]

# The whole room log as Ben (complete) holds it. Ana joined late: 1-3 never reached her.
EARLY: Log = [
    (1, "op-1", BEN.fingerprint, env(FactAdd("f1", "only ben saw this"), "ben", 1.0)),
    (2, "op-2", BEN.fingerprint, env(TaskAdd("t1", "ship it"), "ben", 2.0)),
    (3, "op-3", BEN.fingerprint, None),
]
OURS = env(FactAdd("f9", "ours"), "ana", 4.0)
LATER: Log = [
    (4, "mine-4", ANA.fingerprint, OURS),
    (5, "op-5", BEN.fingerprint, env(TaskClaim("t1"), "ben", 5.0)),
    (6, "op-6", BEN.fingerprint, None),
]


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = room_db(tmp_path / "state.db")
    yield c
    c.close()


def conceded(conn: sqlite3.Connection) -> MemoryFollower:
    """Ana holds 4 (hers) and 5-6 (parked behind the hole 1-3), and gives 1-3 up."""
    follower = MemoryFollower(ANA.fingerprint)
    sent(conn, 4, OURS, "mine-4")
    follower.applied(conn, inbound(5, LATER[1][3]))
    follower.applied(conn, inbound(6, MessageOp("m", "hi")))
    follower.concede(conn, ROOM)
    return follower


def journal(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT seq FROM memory_pending ORDER BY seq")]


def test_giving_a_hole_up_keeps_a_journal_from_the_first_op_held(
    conn: sqlite3.Connection,
) -> None:
    """Conceded, journaling from 4 (1-3 given up are not in it); ops after it are kept too."""
    follower = conceded(conn)
    follower.applied(conn, inbound(7, env(FactAdd("f2", "late"), "ben", 7.0)))
    cur = m.cursor(conn, ROOM)
    assert (cur.hole_from, cur.conceded, cur.journal_from) == (None, True, 4)
    assert journal(conn) == [4, 5, 6, 7]
    assert m.repairing_rooms(conn) == [(ROOM, 4)]


def test_a_complete_snapshot_repairs_the_memory_under_its_journal(
    conn: sqlite3.Connection,
) -> None:
    """Ben's snapshot at 7 (for anyone's request) is installed and 8-9 from the journal are
    applied on top: Ana's memory is then exactly the whole log's, the given-up fact included."""
    follower = conceded(conn)
    seven = (7, "op-7", BEN.fingerprint, env(FactAdd("f2", "late"), "ben", 7.0))
    follower.applied(conn, inbound(7, seven[3]))
    ben = replica([*EARLY, *LATER, seven])
    eight = (8, "op-8", BEN.fingerprint, env(FactAdd("f3", "after the snapshot"), "ben", 8.0))
    follower.applied(conn, inbound(8, eight[3]))
    mine = env(FactAdd("f10", "ours, after it"), "ana", 9.0)
    sent(conn, 9, mine, "mine-9")
    follower.advance(conn, ROOM)
    chunks = snapshot_chunks(ben, "someone-elses", BEN)
    for i, chunk in enumerate(chunks):
        follower.applied(conn, inbound(10 + i, chunk))
    whole = replica([*EARLY, *LATER, seven, eight, (9, "mine-9", ANA.fingerprint, mine)])
    for seq in range(10, 10 + len(chunks)):
        whole.skip(seq)
    state = m.load_state(conn, ROOM)
    assert state.state_hash() == whole.state_hash()
    assert state.fact("f1") is not None and state.fact("f10") is not None
    cur = m.cursor(conn, ROOM)
    assert (cur.conceded, cur.journal_from) == (False, None)
    assert journal(conn) == [] and m.repairing_rooms(conn) == []


def test_a_snapshot_that_gave_ops_up_too_does_not_repair(conn: sqlite3.Connection) -> None:
    """Pieces saying their sender conceded are not even stored; memory stays as it was."""
    follower = conceded(conn)
    before = m.load_state(conn, ROOM).state_hash()
    other = replica([(1, "-", "", None), (2, "-", "", None), (3, "-", "", None), *LATER])
    for i, chunk in enumerate(snapshot_chunks(other, "r", BEN)):
        follower.applied(conn, inbound(7 + i, attrs.evolve(chunk, conceded=True)))
    assert conn.execute("SELECT count(*) FROM memory_chunks").fetchone()[0] == 0
    assert m.cursor(conn, ROOM).conceded
    assert m.load_state(conn, ROOM).state_hash() != before  # moved on by skipping the chunks
    assert m.load_state(conn, ROOM).fact("f1") is None


def test_a_snapshot_from_before_the_journal_does_not_repair(conn: sqlite3.Connection) -> None:
    """The journal starts at 4: a snapshot at 2 cannot be brought up to date from it."""
    follower = conceded(conn)
    old = replica(EARLY[:2])
    chunk = snapshot_chunks(old, "r", BEN, 1 << 20)[0]
    follower.applied(conn, inbound(7, chunk))
    assert m.cursor(conn, ROOM).conceded
    assert m.load_state(conn, ROOM).fact("f1") is None


def test_installing_a_conceded_snapshot_into_a_hole_makes_us_conceded(
    conn: sqlite3.Connection,
) -> None:
    """Cy fills our hole with a snapshot that gave ops up: we journal from just after it."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(5, LATER[1][3]))
    m.set_request(conn, ROOM, "r1", BEN.fingerprint, 0.0)
    cy = replica([(1, "-", "", None), (2, "-", "", None), (3, "-", "", None), *LATER[:2]])
    chunks = snapshot_chunks(cy, "r1", BEN, 1 << 20)
    follower.applied(conn, inbound(6, attrs.evolve(chunks[0], conceded=True)))
    cur = m.cursor(conn, ROOM)
    assert (cur.hole_from, cur.conceded, cur.journal_from) == (None, True, 6)
    follower.applied(conn, inbound(7, MessageOp("m", "hi")))
    assert journal(conn) == [6, 7]


def test_a_new_hole_ends_the_journal(conn: sqlite3.Connection) -> None:
    """Ops 7-8 never arrive: the hole from 7 drops the journal before it, keeps what is parked
    behind it, and the memory stays conceded until a snapshot says otherwise."""
    follower = conceded(conn)
    follower.applied(conn, inbound(9, MessageOp("m", "after a gap")))
    cur = m.cursor(conn, ROOM)
    assert (cur.hole_from, cur.conceded, cur.journal_from) == (7, True, None)
    assert journal(conn) == [9]


def test_dropping_the_journal_keeps_the_memory_conceded(conn: sqlite3.Connection) -> None:
    follower = conceded(conn)
    m.drop_journal(conn, ROOM)
    cur = m.cursor(conn, ROOM)
    assert (cur.conceded, cur.journal_from) == (True, None) and journal(conn) == []
    follower.applied(conn, inbound(7, MessageOp("m", "hi")))
    assert journal(conn) == [] and m.load_state(conn, ROOM).last_seq == 7


def test_a_batch_journals_too(conn: sqlite3.Connection) -> None:
    """The room actor's batch path does not skip the journal."""
    follower = conceded(conn)
    with follower.batch(conn):
        follower.applied(conn, inbound(7, env(FactAdd("f2", "late"), "ben", 7.0)))
        follower.applied(conn, inbound(8, MessageOp("m", "hi")))
    assert journal(conn) == [4, 5, 6, 7, 8]
    assert m.load_state(conn, ROOM).last_seq == 8


def test_the_whole_scenario_converges_to_the_complete_member(conn: sqlite3.Connection) -> None:
    """Without the repair the conceded memory would lack f1 and t1 for ever (the seed 146
    failure); the planted check: the replica that gave 1-3 up really differs from Ben's."""
    follower = conceded(conn)
    gave_up = m.load_state(conn, ROOM)
    ben = replica([*EARLY, *LATER])
    assert gave_up.state_hash() != ben.state_hash()
    for i, chunk in enumerate(snapshot_chunks(ben, "r", BEN)):
        follower.applied(conn, inbound(7 + i, chunk))
    ben_now = MemoryState.from_snapshot(ben.snapshot())
    for seq in range(7, m.load_state(conn, ROOM).last_seq + 1):
        ben_now.skip(seq)
    assert m.load_state(conn, ROOM).state_hash() == ben_now.state_hash()


def test_facts_and_tasks_say_which_rooms_memory_is_incomplete(
    conn: sqlite3.Connection,
) -> None:
    """A conceded memory is listed as incomplete (not catching up) until it is repaired."""
    room = Room(ROOM, "team", "shared", "joined", 0, 0.0)

    def listing(facts: bool) -> tuple[list[str], list[str]]:
        reply = list_memory(conn, [room], facts=facts, include_all=False, now=0.0,
                            me=ANA.fingerprint, my_label="ana")
        return reply.catching_up, reply.incomplete

    follower = conceded(conn)
    assert listing(True) == listing(False) == ([], ["team"])
    for i, chunk in enumerate(snapshot_chunks(replica([*EARLY, *LATER]), "r", BEN)):
        follower.applied(conn, inbound(7 + i, chunk))
    assert listing(True) == ([], [])


def test_a_room_we_were_removed_from_is_not_probed_stalled_or_repairing(
    conn: sqlite3.Connection,
) -> None:
    """Removed, our asks would be refused and their history must not count once we are back
    (sim seed 7366): the room drops out of both lists, and is in them again when rejoined."""
    m.set_hole(conn, ROOM, 1)
    assert [c.room_id for c in m.stalled_rooms(conn)] == [ROOM] and m.rooms_in(conn) == [ROOM]
    mark_removed(conn, ROOM, BEN.fingerprint, 10.0)
    assert m.stalled_rooms(conn) == [] and m.rooms_in(conn) == []
    reopen_room(conn, ROOM, 0, b"k" * 32)  # invited back: not in the room yet either
    assert m.stalled_rooms(conn) == [] and m.rooms_in(conn) == []
    conn.execute("UPDATE rooms SET state = 'joined' WHERE room_id = ?", (ROOM,))
    assert [c.room_id for c in m.stalled_rooms(conn)] == [ROOM] and m.rooms_in(conn) == [ROOM]
    m.set_hole(conn, ROOM, None)
    conceded(conn).applied(conn, inbound(7, env(FactAdd("f2", "late"), "ben", 7.0)))
    assert m.repairing_rooms(conn) == [(ROOM, 4)]
    mark_removed(conn, ROOM, BEN.fingerprint, 20.0)
    assert m.repairing_rooms(conn) == []
