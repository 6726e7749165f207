"""Room memory in a real state.db: records, our own ops, holes, signed snapshots."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk import crypto
from crosstalk.core.memory import MemoryState
from crosstalk.core.memory_transfer import pack_snapshot, signed_message
from crosstalk.core.room import Applied
from crosstalk.features.memory import views as v
from crosstalk.store import memory as m
from crosstalk.store.db import connect
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Contact, Room, RoomMember, add_member, add_room, upsert_contact
from crosstalk.wire.converter import converter
from crosstalk.wire.memory import (
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    FactRecord,
    MemoryOp,
    OpContext,
    Outcome,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskClaim,
)
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp, RoomOp, SyncChunk, SyncRequest

ROOM = "room-1"
ANA = crypto.Keys(b"a" * 32, b"A" * 32)
BEN = crypto.Keys(b"b" * 32, b"B" * 32)
EVE = crypto.Keys(b"e" * 32, b"E" * 32)


def room_db(path: Path) -> sqlite3.Connection:
    """A state.db with Ana and Ben in ROOM, inside an open transaction."""
    c = connect(path)
    c.execute("BEGIN")
    add_room(c, Room(ROOM, "ben", "direct", "joined", 0, 0.0), b"k" * 32)
    for keys, label in ((ANA, "ana"), (BEN, "ben")):
        add_member(c, RoomMember(ROOM, keys.fingerprint, label, keys.ed_pub, keys.x_pub))
    return c


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = room_db(tmp_path / "state.db")
    yield c
    c.close()


def env(op: MemoryOp, label: str, at: float) -> MemoryEnvelope:
    return MemoryEnvelope(op, at=at, label=label)


def inbound(seq: int, op: RoomOp | None, sender: crypto.Keys = BEN) -> Applied:
    return Applied(ROOM, seq, f"op-{seq}", sender.fingerprint, 1000.0 + seq, op)


def sent(conn: sqlite3.Connection, seq: int, op: MemoryEnvelope | None, op_id: str) -> None:
    """Our own op, sequenced by the relay at ``seq`` (outbox row 'sent')."""
    if op is not None:
        m.record_sent(conn, ROOM, op_id, op, 0.0)
    conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
        "VALUES (?, ?, x'00', 'sent', ?, 0)",
        (op_id, ROOM, seq),
    )


def replica(ops: list[tuple[int, str, str, MemoryEnvelope | None]]) -> MemoryState:
    """What a replica that saw the whole log holds: (seq, op_id, sender, envelope)."""
    state = MemoryState(ROOM)
    for seq, op_id, sender, e in ops:
        if e is None:
            state.skip(seq)
        else:
            ctx = OpContext(seq=seq, op_id=op_id, sender=sender, sender_label=e.label, ts=e.at)
            state.apply(e.op, ctx)
    return state


def test_stored_memory_reloads_to_the_same_hash(conn: sqlite3.Connection) -> None:
    """Facts and tasks applied through the follower reload, in a fresh follower, hash for hash."""
    ops = [
        env(FactAdd("f1", "uploads retry 3 times", ("api",)), "ben", 10.0),
        env(FactConfirm("f1"), "ben", 11.0),
        env(TaskAdd("t1", "fix upload"), "ben", 12.0),
        env(TaskClaim("t1"), "ben", 13.0),
    ]
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(1, MessageOp("x", "hello")))
    for seq, e in enumerate(ops, start=2):
        follower.applied(conn, inbound(seq, e))
    expected = replica([(1, "op-1", BEN.fingerprint, None)] + [
        (seq, f"op-{seq}", BEN.fingerprint, e) for seq, e in enumerate(ops, start=2)
    ])
    reloaded = m.load_state(conn, ROOM)
    assert reloaded.last_seq == 5
    assert reloaded.state_hash() == expected.state_hash()
    assert MemoryFollower(ANA.fingerprint).state(conn, ROOM).state_hash() == expected.state_hash()


_OUTCOMES = st.builds(
    Outcome,
    op_id=st.text(),
    seq=st.integers(min_value=1, max_value=2**63 - 1),
    code=st.sampled_from(OutcomeCode),
    winner=st.none() | st.builds(Person, st.text(), st.text()),
    duplicate=st.booleans(),
)


@given(_OUTCOMES)
def test_an_outcome_row_is_the_canonical_json_of_the_outcome(outcome: Outcome) -> None:
    """The hand-written outcome row is exactly what the converter and sorted JSON would write."""
    expected = json.dumps(converter.unstructure(outcome), sort_keys=True, separators=(",", ":"))
    assert m.outcome_body(outcome) == expected


_FACTS = st.builds(
    FactRecord,
    fact_id=st.text(),
    text=st.text(),
    tags=st.lists(st.text(), max_size=3).map(tuple),
    author=st.builds(Person, st.text(), st.text()),
    added_at=st.floats(allow_nan=False, allow_infinity=False),
    added_seq=st.integers(min_value=1, max_value=2**63 - 1),
    text_by=st.builds(Person, st.text(), st.text()),
    last_affirmed=st.floats(allow_nan=False, allow_infinity=False),
)


@given(_FACTS)
def test_a_record_row_is_the_sorted_json_of_the_record(fact: FactRecord) -> None:
    """The row encoder built once writes what json.dumps with sorted keys writes (any text,
    any float)."""
    expected = json.dumps(converter.unstructure(fact), sort_keys=True, separators=(",", ":"))
    assert m._dumps(fact) == expected


def test_the_hand_written_outcome_row_knows_every_field_of_outcome() -> None:
    """A field added to Outcome must be added to its hand-written row too (this fails first)."""
    assert [f.name for f in attrs.fields(Outcome)] == [
        "op_id", "seq", "code", "winner", "duplicate",
    ]


def test_our_own_op_is_applied_at_the_seq_the_relay_gave_it(conn: sqlite3.Connection) -> None:
    """The relay never echoes our op; the follower applies it from memory_sent at its seq."""
    follower = MemoryFollower(ANA.fingerprint)
    mine = env(TaskClaim("t1"), "ana", 20.0)
    follower.applied(conn, inbound(1, env(TaskAdd("t1", "fix upload"), "ben", 10.0)))
    sent(conn, 2, mine, "mine")
    follower.applied(conn, inbound(3, env(TaskClaim("t1"), "ben", 21.0)))
    state = m.load_state(conn, ROOM)
    assert state.last_seq == 3
    task = state.task("t1")
    assert task is not None and task.claimer is not None
    assert task.claimer.fingerprint == ANA.fingerprint
    lost = m.outcome(conn, ROOM, "op-3")
    assert lost is not None and lost.claim_answer == "lost"


def test_advance_applies_our_op_with_nothing_after_it(conn: sqlite3.Connection) -> None:
    """A claim of ours that is the newest op still gets its outcome once sequenced."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(1, env(TaskAdd("t1", "fix upload"), "ben", 10.0)))
    sent(conn, 2, env(TaskClaim("t1"), "ana", 20.0), "mine")
    follower.advance(conn, ROOM)
    won = m.outcome(conn, ROOM, "mine")
    assert won is not None and won.claim_answer == "won"
    assert m.cursor(conn, ROOM).hole_from is None


def test_advance_waits_for_an_inbound_op_the_room_has_not_applied(
    conn: sqlite3.Connection,
) -> None:
    """Our op at 2 waits while the link holds op 1 that the room actor has not applied yet."""
    follower = MemoryFollower(ANA.fingerprint)
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, 'op-1', 1, ?, x'00', 0, 0)",
        (ROOM, BEN.fingerprint),
    )
    sent(conn, 2, env(TaskClaim("t1"), "ana", 20.0), "mine")
    follower.advance(conn, ROOM)
    assert m.outcome(conn, ROOM, "mine") is None
    assert m.cursor(conn, ROOM).hole_from is None
    follower.applied(conn, inbound(1, env(TaskAdd("t1", "fix upload"), "ben", 10.0)))
    won = m.outcome(conn, ROOM, "mine")
    assert won is not None and won.claim_answer == "won"


def test_our_probe_past_an_expired_log_marks_a_hole(conn: sqlite3.Connection) -> None:
    """A probe sequenced at 7 with nothing held before it shows ops 1-6 are gone."""
    follower = MemoryFollower(ANA.fingerprint)
    sent(conn, 7, None, "probe")
    follower.advance(conn, ROOM)
    assert m.cursor(conn, ROOM).hole_from == 1


def snapshot_chunks(
    source: MemoryState, request_id: str, signer: crypto.Keys, chunk_bytes: int = 64
) -> list[SyncChunk]:
    digest, pieces = pack_snapshot(source.snapshot(), chunk_bytes=chunk_bytes)
    sig = crypto.sign(signer, signed_message(ROOM, request_id, source.last_seq, digest))
    return [
        SyncChunk(request_id, source.last_seq, i, len(pieces), digest, sig, piece)
        for i, piece in enumerate(pieces)
    ]


def away_scenario(conn: sqlite3.Connection) -> tuple[MemoryFollower, MemoryState]:
    """Ben's log 1-4 expired before we saw it; 5 reaches us; we ask at 6 (request r1)."""
    ben_ops: list[tuple[int, str, str, MemoryEnvelope | None]] = [
        (1, "op-1", BEN.fingerprint, env(FactAdd("f1", "old text"), "ben", 1.0)),
        (2, "op-2", BEN.fingerprint, env(FactCorrect("f1", "new text", "it changed"), "ben", 2.0)),
        (3, "op-3", BEN.fingerprint, env(FactAdd("f2", "stale"), "ben", 3.0)),
        (4, "op-4", BEN.fingerprint, env(FactForget("f2"), "ben", 4.0)),
        (5, "op-5", BEN.fingerprint, env(TaskAdd("t1", "ship it"), "ben", 5.0)),
        (6, "ask", ANA.fingerprint, None),
    ]
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(5, ben_ops[4][3]))
    assert m.cursor(conn, ROOM).hole_from == 1
    m.set_request(conn, ROOM, "r1", BEN.fingerprint, 0.0)
    sent(conn, 6, None, "ask")
    return follower, replica(ben_ops)


def test_a_signed_snapshot_fills_the_hole_and_parked_ops_follow(
    conn: sqlite3.Connection,
) -> None:
    """After the pieces arrive, memory equals Ben's, corrections and forgets included."""
    follower, ben = away_scenario(conn)
    chunks = snapshot_chunks(ben, "r1", BEN)
    assert len(chunks) > 1
    for i, chunk in enumerate(chunks):
        follower.applied(conn, inbound(7 + i, chunk))
    after = 6 + len(chunks)
    for seq in range(7, after + 1):
        ben.skip(seq)
    state = m.load_state(conn, ROOM)
    assert m.cursor(conn, ROOM).hole_from is None
    assert state.last_seq == after
    assert state.state_hash() == ben.state_hash()
    f1 = state.fact("f1")
    assert f1 is not None and f1.text == "new text"
    assert [f.fact_id for f in state.facts()] == ["f1"]
    assert conn.execute("SELECT count(*) FROM memory_pending").fetchone()[0] == 0


def test_a_hole_says_where_what_we_hold_begins(conn: sqlite3.Connection) -> None:
    """held_from: the first seq after the hole that we hold (our own op 4 before parked 5)."""
    follower = MemoryFollower(ANA.fingerprint)
    assert follower.held_from(conn, ROOM) is None
    sent(conn, 4, env(FactAdd("f9", "ours"), "ana", 4.0), "mine-4")
    follower.applied(conn, inbound(5, env(TaskAdd("t1", "ship it"), "ben", 5.0)))
    assert m.cursor(conn, ROOM).hole_from == 1
    assert follower.held_from(conn, ROOM) == 4


def test_a_conceded_hole_skips_what_nobody_holds_and_applies_the_rest(
    conn: sqlite3.Connection,
) -> None:
    """Giving up seqs 1-3: our op at 4 and Ben's parked 5 apply, and the gap at 6 is a new hole
    (a member may hold it: sim seed 127). Given up in turn, 6 is skipped and 7 applies; then 8,
    before our op at 9. The end is what a replica that saw only what we hold would have."""
    follower = MemoryFollower(ANA.fingerprint)
    ours = env(FactAdd("f9", "ours"), "ana", 4.0)
    sent(conn, 4, ours, "mine-4")
    follower.applied(conn, inbound(5, env(TaskAdd("t1", "ship it"), "ben", 5.0)))
    follower.applied(conn, inbound(7, env(TaskClaim("t1"), "ben", 7.0)))
    late = env(FactAdd("f10", "late"), "ana", 9.0)
    sent(conn, 9, late, "mine-9")
    follower.concede(conn, ROOM)
    assert (m.cursor(conn, ROOM).last_seq, m.cursor(conn, ROOM).hole_from) == (5, 6)
    follower.concede(conn, ROOM)
    assert (m.cursor(conn, ROOM).last_seq, m.cursor(conn, ROOM).hole_from) == (7, 8)
    follower.concede(conn, ROOM)
    expected = replica([
        (1, "-", "", None), (2, "-", "", None), (3, "-", "", None),
        (4, "mine-4", ANA.fingerprint, ours),
        (5, "op-5", BEN.fingerprint, env(TaskAdd("t1", "ship it"), "ben", 5.0)),
        (6, "-", "", None),
        (7, "op-7", BEN.fingerprint, env(TaskClaim("t1"), "ben", 7.0)),
        (8, "-", "", None),
        (9, "mine-9", ANA.fingerprint, late),
    ])
    state = m.load_state(conn, ROOM)
    assert m.cursor(conn, ROOM).hole_from is None
    assert state.last_seq == 9
    assert state.state_hash() == expected.state_hash()
    # What it applied after the last hole it gave up stays journaled, for a repair (a complete
    # snapshot reaching past 8 goes under it: tests/store/test_memory_repair.py).
    seqs = [r[0] for r in conn.execute("SELECT seq FROM memory_pending ORDER BY seq")]
    assert seqs == [9]
    assert follower.held_from(conn, ROOM) is None


@pytest.mark.parametrize("case", ["wrong signer", "not a member", "other request"])
def test_a_snapshot_that_does_not_verify_is_not_adopted(
    conn: sqlite3.Connection, case: str
) -> None:
    """A snapshot signed by another, sent by a non-member, or for another request is ignored."""
    follower, ben = away_scenario(conn)
    signer, sender, request = BEN, BEN, "r1"
    if case == "wrong signer":
        signer = EVE
    elif case == "not a member":
        signer = sender = EVE
    else:
        request = "r2"
    for i, chunk in enumerate(snapshot_chunks(ben, request, signer)):
        follower.applied(conn, inbound(7 + i, chunk, sender))
    cur = m.cursor(conn, ROOM)
    assert cur.hole_from == 1 and cur.last_seq == 0
    assert m.load_state(conn, ROOM).facts() == []


def test_a_snapshot_older_than_the_hole_is_ignored(conn: sqlite3.Connection) -> None:
    """A piece whose last_seq does not reach the hole is refused before it is stored."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(1, env(FactAdd("f0", "seen"), "ben", 1.0)))
    follower.applied(conn, inbound(5, SyncRequest("x", 0)))
    assert m.cursor(conn, ROOM).hole_from == 2
    m.set_request(conn, ROOM, "r1", BEN.fingerprint, 0.0)
    old = replica([(1, "op-1", BEN.fingerprint, env(FactAdd("f0", "seen"), "ben", 1.0))])
    follower.applied(conn, inbound(6, snapshot_chunks(old, "r1", BEN, 1 << 20)[0]))
    assert m.cursor(conn, ROOM).hole_from == 2
    assert conn.execute("SELECT count(*) FROM memory_chunks").fetchone()[0] == 0


def test_a_fact_from_a_member_with_no_direct_channel_is_kept_and_attributed(
    conn: sqlite3.Connection,
) -> None:
    """Cy is in the room's roster but not our contact: the fact shows under cy's own name."""
    cy = crypto.Keys(b"c" * 32, b"C" * 32)
    add_member(conn, RoomMember(ROOM, cy.fingerprint, "cy", cy.ed_pub, cy.x_pub))
    upsert_contact(conn, Contact(BEN.fingerprint, "benjamin", "laptop", BEN.ed_pub, BEN.x_pub))
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, inbound(1, env(FactAdd("f1", "cy says hi"), "cy", 1.0), cy))
    follower.applied(conn, inbound(2, env(FactConfirm("f1"), "ben", 2.0), BEN))
    rooms = v.joined_rooms(conn)
    listed = v.list_memory(
        conn, rooms, facts=True, include_all=False, now=10.0, me=ANA.fingerprint, my_label="ana"
    )
    assert isinstance(listed, v.FactsReply)
    (fact,) = listed.facts
    assert fact.text == "cy says hi" and fact.by == ["cy", "benjamin"] and fact.age_s == 8.0
