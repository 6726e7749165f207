"""Storage backends keep the same durable state: SQLite matches the in-memory reference."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from crosstalk.errors import DamagedState
from crosstalk.wire.relay import Member
from relay.keys import load_or_create_key
from relay.sqlite_store import SqliteStorage
from relay.storage import (
    CursorPut,
    DevicePut,
    MemberDeleted,
    MemberPut,
    MemoryStorage,
    OpAppended,
    OpsPruned,
    RoomDeleted,
    RoomPut,
    StoredOp,
    Write,
)

ALICE = Member("aaaa-aaaa-aaaa-aaaa", b"A" * 32, b"a" * 32, "joined", "aaaa-aaaa-aaaa-aaaa", b"s")
BOB = Member("bbbb-bbbb-bbbb-bbbb", b"B" * 32, b"b" * 32, "invited", ALICE.fingerprint, b"t")

SCRIPT: list[list[Write]] = [
    [RoomPut("r1"), MemberPut("r1", ALICE), DevicePut(ALICE.fingerprint, "d1"),
     CursorPut(ALICE.fingerprint, "d1", "r1", 0)],
    [MemberPut("r1", BOB), RoomPut("r2"), MemberPut("r2", ALICE)],
    [OpAppended("r1", StoredOp(i, ALICE.fingerprint, f"o{i}", bytes([i]) * 10, float(i)))
     for i in range(1, 6)],
    [OpsPruned("r1", 2), CursorPut(ALICE.fingerprint, "d1", "r1", 2),
     MemberPut("r1", Member(BOB.fingerprint, BOB.ed_pub, BOB.x_pub, "joined", ALICE.fingerprint,
                            b"t"))],
    [MemberDeleted("r1", BOB.fingerprint), RoomDeleted("r2")],
]


def test_sqlite_and_memory_storage_agree_and_survive_reopen(tmp_path: Path) -> None:
    """The same writes give the same snapshot in both backends, also after reopening SQLite."""
    memory, sqlite = MemoryStorage(), SqliteStorage(tmp_path / "relay.db")
    for batch in SCRIPT:
        memory.commit(batch)
        sqlite.commit(batch)
    assert sqlite.load() == memory.load()
    sqlite.close()
    reopened = SqliteStorage(tmp_path / "relay.db")
    snapshot = reopened.load()
    reopened.close()
    assert snapshot == memory.load()
    [room] = snapshot.rooms
    assert (room.room, room.head, [op.seq for op in room.ops]) == ("r1", 5, [3, 4, 5])
    assert [m.fingerprint for m in room.members] == [ALICE.fingerprint]


def test_failed_batch_leaves_nothing_behind(tmp_path: Path) -> None:
    """A batch is atomic: a write that fails rolls back the whole transaction."""
    store = SqliteStorage(tmp_path / "relay.db")
    store.commit([RoomPut("r1")])
    op = StoredOp(1, "x", "o1", b"x", 1.0)
    with pytest.raises(sqlite3.IntegrityError):
        store.commit([RoomPut("r2"), OpAppended("r1", op), OpAppended("r1", op)])
    assert [r.room for r in store.load().rooms] == ["r1"]
    store.close()


def test_a_staged_batch_is_durable_only_once_finished_on_another_thread(tmp_path: Path) -> None:
    """``stage`` applies a batch uncommitted; its ``finish`` (run on a worker thread, as the
    shell runs the fsync) makes it durable: a second connection sees nothing before, all after."""
    store = SqliteStorage(tmp_path / "relay.db")
    finish = store.stage([RoomPut("r1"), MemberPut("r1", ALICE)])
    reader = sqlite3.connect(tmp_path / "relay.db")  # a plain reader: the writer holds the lock
    seen_before = reader.execute("SELECT room FROM rooms").fetchall()
    reader.close()
    worker = threading.Thread(target=finish)
    worker.start()
    worker.join()
    store.close()
    after = SqliteStorage(tmp_path / "relay.db")
    seen_after = [(r.room, [m.fingerprint for m in r.members]) for r in after.load().rooms]
    after.close()
    assert seen_before == []
    assert seen_after == [("r1", [ALICE.fingerprint])]


def test_database_file_is_private(tmp_path: Path) -> None:
    """The relay database is created 0600."""
    SqliteStorage(tmp_path / "relay.db").close()
    assert (tmp_path / "relay.db").stat().st_mode & 0o777 == 0o600


def test_relay_key_is_made_once_and_kept(tmp_path: Path) -> None:
    """The key file is created 0600 on first use and read back unchanged."""
    first = load_or_create_key(tmp_path)
    assert (tmp_path / "relay.key").stat().st_mode & 0o777 == 0o600
    assert bytes(load_or_create_key(tmp_path)) == bytes(first)


def test_unreadable_relay_key_is_never_replaced(tmp_path: Path) -> None:
    """A key file that does not parse is damaged state, left exactly as it was."""
    (tmp_path / "relay.key").write_text("{not json")
    with pytest.raises(DamagedState):
        load_or_create_key(tmp_path)
    assert (tmp_path / "relay.key").read_text() == "{not json"
