"""Pairing slots and grants in storage, over SQLite and NATS JetStream alike (MemoryStorage is
the model): save, reload after reopening, expiry at load, replacement and removal."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from relay.nats_layout import SLOT_KEEP
from relay.nats_store import NatsStorage
from relay.sqlite_store import SCHEMA_VERSION, SqliteStorage
from relay.storage import (
    GrantDeleted,
    GrantPut,
    MemberPut,
    MemoryStorage,
    Peer,
    RoomPut,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRecord,
    SlotRemoved,
    Write,
)
from tests.relay.harness import WallClock
from tests.relay.nats_process import NatsServer
from tests.relay.test_nats_storage import Opener, nats_server, opener, wall  # noqa: F401
from tests.relay.test_storage import ALICE as ALICE_MEMBER

ANA = Peer("aaaa-aaaa-aaaa-aaaa", b"A" * 32, b"a" * 32)
BEN = Peer("bbbb-bbbb-bbbb-bbbb", b"B" * 32, b"b" * 32)
CAL = Peer("cccc-cccc-cccc-cccc", b"C" * 32, b"c" * 32)

SLOT_SCRIPT: list[list[Write]] = [
    [SlotOpened("0042", ANA, 1_900.0), SlotOpened("7001", BEN, 1_950.0)],
    [SlotPartPut("0042", "owner", 0, b"pake-a"),
     SlotPartPut("0042", "owner", 1, bytes(range(256)))],
    [SlotFilled("0042", BEN), GrantPut(ANA.fingerprint, BEN.fingerprint, 2_000.0),
     SlotPartPut("0042", "joiner", 0, b"pake-b")],
    [SlotOpened("0300", CAL, 1_800.0), SlotRemoved("7001"),
     GrantPut(BEN.fingerprint, CAL.fingerprint, 2_100.0),
     GrantDeleted(BEN.fingerprint, CAL.fingerprint)],
]

EXPECTED = [
    SlotRecord("0042", ANA, 1_900.0, BEN, [
        SlotPartPut("0042", "joiner", 0, b"pake-b"), SlotPartPut("0042", "owner", 0, b"pake-a"),
        SlotPartPut("0042", "owner", 1, bytes(range(256)))]),
    SlotRecord("0300", CAL, 1_800.0),
]


def test_slots_and_grants_match_the_model_and_survive_reopen(
    opener: Opener, wall: WallClock  # noqa: F811
) -> None:
    """Opened, filled, written and removed slots reload exactly, before and after reopening."""
    memory, store = MemoryStorage(clock=wall), opener()
    for batch in SLOT_SCRIPT:
        memory.commit(batch)
        store.commit(batch)
    assert (store.load().slots, store.load().grants) == (memory.load().slots,
                                                          memory.load().grants)
    store.close()
    snapshot = opener().load()
    assert snapshot.slots == EXPECTED
    assert snapshot.grants == [GrantPut(ANA.fingerprint, BEN.fingerprint, 2_000.0)]


def test_expired_slots_and_grants_are_never_loaded(
    opener: Opener, wall: WallClock  # noqa: F811
) -> None:
    """At each slot's or grant's expiry time it drops out of what a reopened store loads."""
    store = opener()
    for batch in SLOT_SCRIPT:
        store.commit(batch)
    wall.now = 1_799.999
    assert [s.number for s in opener().load().slots] == ["0042", "0300"]
    wall.now = 1_800.0
    assert [s.number for s in opener().load().slots] == ["0042"]
    wall.now = 1_900.0
    snapshot = opener().load()
    assert (snapshot.slots, len(snapshot.grants)) == ([], 1)
    wall.now = 2_000.0
    assert opener().load().grants == []


def test_reopening_a_number_replaces_the_old_slot_whole(opener: Opener) -> None:  # noqa: F811
    """A SlotOpened on a number still stored (never removed) drops its joiner and parts."""
    store = opener()
    store.commit(SLOT_SCRIPT[0] + SLOT_SCRIPT[1] + SLOT_SCRIPT[2])
    store.commit([SlotOpened("0042", CAL, 2_500.0)])
    again = [s for s in opener().load().slots if s.number == "0042"]
    assert again == [SlotRecord("0042", CAL, 2_500.0)]


def test_removing_a_slot_removes_its_parts_and_joiner(opener: Opener) -> None:  # noqa: F811
    """After SlotRemoved nothing of the slot loads, and rooms beside it are untouched."""
    store = opener()
    store.commit([RoomPut("r"), MemberPut("r", ALICE_MEMBER), *SLOT_SCRIPT[0], *SLOT_SCRIPT[1],
                  *SLOT_SCRIPT[2]])
    store.commit([SlotRemoved("0042"), SlotRemoved("7001"), SlotRemoved("0001")])
    snapshot = opener().load()
    assert snapshot.slots == []
    assert [r.room for r in snapshot.rooms] == ["r"]


def test_an_older_sqlite_file_gains_the_slot_tables_and_keeps_its_rooms(tmp_path: Path) -> None:
    """A database made before slots were stored opens, keeps its rooms and stores slots."""
    path = tmp_path / "relay.db"
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE rooms (room TEXT PRIMARY KEY, head INTEGER NOT NULL);"
        "INSERT INTO rooms VALUES ('old', 7);"
    )
    db.close()
    store = SqliteStorage(path, clock=WallClock(1_000.0))
    try:
        store.commit(SLOT_SCRIPT[0])
        snapshot = store.load()
        version = store._db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        store.close()
    assert [(r.room, r.head) for r in snapshot.rooms] == [("old", 7)]
    assert [s.number for s in snapshot.slots] == ["0042", "7001"]
    assert version == SCHEMA_VERSION


def test_nats_slot_messages_outlive_a_slot_or_grant_and_nothing_else_expires(
    nats_server: NatsServer,  # noqa: F811
) -> None:
    """Slot and grant messages carry a TTL past 15 minutes; the stream itself has no age limit
    (room logs and rosters must not age out)."""
    store = NatsStorage(nats_server.url, namespace="slotttl", timeout=5.0)
    try:
        info = store._call(lambda js: js.api("$JS.API.STREAM.INFO.slotttl_rooms", {}, "info"))
        grant = store.layout.plan([GrantPut("a", "b", 900.0)])[0]
    finally:
        store.close()
    assert SLOT_KEEP >= 15 * 60.0 + 60.0
    assert grant.ttl == SLOT_KEEP
    assert info["config"]["allow_msg_ttl"]
    assert not info["config"].get("max_age")
