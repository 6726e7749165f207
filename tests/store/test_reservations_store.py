"""File reservations as room memory in a real state.db: applied by the follower at the relay's
time (ours at the time the relay answered our post), lapsing by that clock, let go at a removal's
seq, persisted and reloaded hash for hash, and carried by snapshots."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.core.memory import MemoryState, canonical_bytes
from crosstalk.core.memory_transfer import pack_snapshot, unpack_snapshot
from crosstalk.core.room import Applied
from crosstalk.store import memory as m
from crosstalk.store import reservations as r
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.wire.memory import FactAdd, OpContext, OutcomeCode
from crosstalk.wire.reservations import ReleaseOp, RenewOp, ReservationCode, ReserveOp
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp, Rekey, RoomOp
from tests.store.test_memory_store import ANA, BEN, ROOM, env, room_db

T0 = 1_800_000_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = room_db(tmp_path / "state.db")
    yield c
    c.close()


def at(seq: int, op: RoomOp, relay_ts: float, sender: str = "") -> Applied:
    """Op ``seq`` of the room log, from ben unless ``sender``, at relay time ``relay_ts``."""
    return Applied(ROOM, seq, f"op-{seq}", sender or BEN.fingerprint, relay_ts, op)


def sent_at(conn: sqlite3.Connection, seq: int, op: MemoryEnvelope, op_id: str, ts: float) -> None:
    """Our own op, sequenced at ``seq`` at relay time ``ts`` (what the posted reply said)."""
    m.record_sent(conn, ROOM, op_id, op, 0.0)
    conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, state, seq, relay_ts, created_at) "
        "VALUES (?, ?, x'00', 'sent', ?, ?, 0)",
        (op_id, ROOM, seq, ts),
    )


def held_ids(conn: sqlite3.Connection, when: float) -> list[str]:
    return [h.reservation.reservation_id for h in r.held(conn, [ROOM], at=when)]


def test_a_reservation_lapses_by_the_relay_clock_not_the_author_clock(
    conn: sqlite3.Connection,
) -> None:
    """ben's clock says the year 2001; the relay's time decides: held for 10 minutes from it."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("src/**",), minutes=10), "ben",
                                     1e9), T0))
    assert held_ids(conn, T0 + 599) == ["r1"]
    assert held_ids(conn, T0 + 600) == []
    reloaded = m.load_state(conn, ROOM)
    held = reloaded.reservations.reservation("r1")
    assert held is not None and held.until == T0 + 600


def test_our_own_reserve_counts_from_the_time_the_relay_answered(
    conn: sqlite3.Connection,
) -> None:
    follower = MemoryFollower(ANA.fingerprint)
    sent_at(conn, 1, env(ReserveOp("r1", "app", ("a.py",), minutes=5), "ana", 1.0), "mine", T0)
    follower.advance(conn, ROOM)
    detail = r.outcome(conn, ROOM, "mine")
    assert detail is not None and detail.code is ReservationCode.GRANTED
    assert detail.until == T0 + 300
    assert m.outcome(conn, ROOM, "mine") is not None


def test_the_first_in_log_order_wins_and_the_loser_hears_who_holds_it(
    conn: sqlite3.Connection,
) -> None:
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("src/**",), reason="refactor"),
                                     "ben", 0.0), T0))
    sent_at(conn, 2, env(ReserveOp("r2", "app", ("src/a.py",)), "ana", 0.0), "mine", T0 + 1)
    follower.advance(conn, ROOM)
    detail = r.outcome(conn, ROOM, "mine")
    assert detail is not None and detail.code is ReservationCode.REFUSED
    assert detail.conflict is not None and detail.conflict.holder.fingerprint == BEN.fingerprint
    outcome = m.outcome(conn, ROOM, "mine")
    assert outcome is not None and outcome.code is OutcomeCode.REFUSED
    assert held_ids(conn, T0 + 2) == ["r1"]


def test_renewal_and_release_through_the_follower(conn: sqlite3.Connection) -> None:
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("x",), minutes=1), "ben", 0.0), T0))
    follower.applied(conn, at(2, env(RenewOp("r1", minutes=60), "ben", 0.0), T0 + 30))
    assert held_ids(conn, T0 + 61) == ["r1"]
    follower.applied(conn, at(3, env(ReleaseOp(("r1",)), "ben", 0.0), T0 + 40))
    assert held_ids(conn, T0 + 41) == []


def test_a_removal_lets_go_of_the_removed_members_reservations_at_its_seq(
    conn: sqlite3.Connection,
) -> None:
    """A rekey naming ben (sent by anyone) ends his reservations on this replica at that seq;
    a replica reloaded from the store agrees."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("x",)), "ben", 0.0), T0))
    follower.applied(conn, at(2, Rekey(1, BEN.fingerprint, {}), T0 + 1, ANA.fingerprint))
    assert held_ids(conn, T0 + 2) == []
    assert m.load_state(conn, ROOM).reservations.reservation("r1") is None


def test_our_own_rekey_lets_go_too(conn: sqlite3.Connection) -> None:
    """We removed ben: our rekey never comes back from the relay; it is applied from what the
    sent writer kept, at the seq it got."""
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("x",)), "ben", 0.0), T0))
    rekey = Rekey(1, BEN.fingerprint, {ANA.fingerprint: b"sealed"})
    m.record_sent_removal(conn, ROOM, "kick", rekey)
    conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, state, seq, relay_ts, created_at) "
        "VALUES ('kick', ?, x'00', 'sent', 2, ?, 0)",
        (ROOM, T0 + 1),
    )
    follower.advance(conn, ROOM)
    assert m.cursor(conn, ROOM).last_seq == 2
    assert held_ids(conn, T0 + 2) == []
    assert [row[2] for row in m.unreported_sent(conn)] == []  # a rekey has nothing to report


def test_the_book_reloads_hash_for_hash_and_travels_in_a_snapshot(
    conn: sqlite3.Connection,
) -> None:
    follower = MemoryFollower(ANA.fingerprint)
    follower.applied(conn, at(1, env(ReserveOp("r1", "app", ("src/**",), True), "ben", 0.0), T0))
    follower.applied(conn, at(2, MessageOp("m", "hello"), T0 + 1))
    follower.applied(conn, at(3, env(ReserveOp("r2", "app", ("src/a.py",), True), "ben", 0.0),
                              T0 + 2))
    live = follower.state(conn, ROOM)
    stored = m.load_state(conn, ROOM)
    assert stored.state_hash() == live.state_hash()
    snapshot = stored.snapshot()
    assert snapshot.reservations is not None
    digest, pieces = pack_snapshot(snapshot)
    back = unpack_snapshot(ROOM, pieces, digest)
    assert MemoryState.from_snapshot(back).state_hash() == live.state_hash()
    m.replace_all(conn, MemoryState.from_snapshot(back))
    assert held_ids(conn, T0 + 3) == ["r1", "r2"]


def test_a_room_without_reservations_keeps_the_bytes_of_before() -> None:
    """No book, no key: a replica that predates reservations hashes such a room the same."""
    state = MemoryState(ROOM)
    ctx = OpContext(seq=1, op_id="o1", sender=BEN.fingerprint, sender_label="ben", ts=T0)
    state.apply(FactAdd("f1", "x"), ctx)
    assert b"reservations" not in canonical_bytes(state.snapshot())
    state.apply(ReserveOp("r1", "app", ("x",)), OpContext(2, "o2", BEN.fingerprint, "ben", T0))
    assert b'"reservations":{' in canonical_bytes(state.snapshot())


def test_relay_now_is_our_clock_corrected_by_the_relays_lead(conn: sqlite3.Connection) -> None:
    assert r.relay_now(conn, now=100.0) == 100.0
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, 'o', 1, 's', x'00', 5000, 1000)",
        (ROOM,),
    )
    assert r.relay_now(conn, now=1010.0) == 5010.0
