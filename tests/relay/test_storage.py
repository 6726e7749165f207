"""Storage backends keep the same durable state: SQLite matches the in-memory reference."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crosstalk.errors import DamagedState
from crosstalk.wire.chain import Statement
from crosstalk.wire.relay import Member
from relay.keys import load_or_create_key
from relay.sqlite_store import SqliteStorage
from relay.storage import (
    CursorPut,
    DepartedOps,
    DevicePut,
    MemberDeleted,
    MemberPut,
    MemoryStorage,
    OpAppended,
    OpsPruned,
    RoomDeleted,
    RoomPut,
    StatementAppended,
    StoredOp,
    Write,
)

ALICE = Member("aaaa-aaaa-aaaa-aaaa", b"A" * 32, b"a" * 32, "joined", "aaaa-aaaa-aaaa-aaaa", b"s")
BOB = Member("bbbb-bbbb-bbbb-bbbb", b"B" * 32, b"b" * 32, "invited", ALICE.fingerprint, b"t")

# Storage keeps statements as they are (the core checked them): any will do.
STMT = Statement("r1", "create", ALICE.fingerprint, ALICE.fingerprint, b"A" * 32, b"a" * 32,
                 -1, bytes(32), b"s" * 64)
STMT2 = Statement("r1", "invite", ALICE.fingerprint, BOB.fingerprint, b"B" * 32, b"b" * 32,
                  0, b"\x01" * 32, b"t" * 64)

SCRIPT: list[list[Write]] = [
    [RoomPut("r1"), MemberPut("r1", ALICE), DevicePut(ALICE.fingerprint, "d1"),
     CursorPut(ALICE.fingerprint, "d1", "r1", 0)],
    [MemberPut("r1", BOB), StatementAppended("r1", 0, STMT), StatementAppended("r1", 1, STMT2),
     RoomPut("r2"), MemberPut("r2", ALICE), StatementAppended("r2", 0, STMT)],
    [OpAppended("r1", StoredOp(i, ALICE.fingerprint, f"o{i}", bytes([i]) * 10, float(i)))
     for i in range(1, 6)],
    [OpsPruned("r1", 2), CursorPut(ALICE.fingerprint, "d1", "r1", 2),
     MemberPut("r1", Member(BOB.fingerprint, BOB.ed_pub, BOB.x_pub, "joined", ALICE.fingerprint,
                            b"t"))],
    [DepartedOps("r2", ALICE.fingerprint, (("z", 1),)),
     DepartedOps("r1", "cccc-cccc-cccc-cccc", (("x", 3),))],
    [MemberDeleted("r1", BOB.fingerprint), DepartedOps("r1", BOB.fingerprint, (("o4", 4),)),
     DepartedOps("r1", BOB.fingerprint, (("o4", 4), ("o5", 5))),
     DepartedOps("r1", "cccc-cccc-cccc-cccc", ()), RoomDeleted("r2")],
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
    # a departed member's unacknowledged ops: the last word per member, none once emptied
    assert room.departed_ops == {BOB.fingerprint: {"o4": 4, "o5": 5}}


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


def _synchronous(store: SqliteStorage) -> int:
    """The connection's ``PRAGMA synchronous`` (1 NORMAL, 2 FULL): what its next COMMIT does."""
    level: int = store._db.execute("PRAGMA synchronous").fetchone()[0]  # the store's own connection
    return level


def test_an_unsynced_batch_skips_the_fsync_and_the_next_synced_one_has_it_again(
    tmp_path: Path,
) -> None:
    """``sync=False`` commits with synchronous=NORMAL (no fsync in WAL mode); a batch staged
    after it is committed with FULL again, which makes both durable."""
    store = SqliteStorage(tmp_path / "relay.db")
    store.commit(SCRIPT[0])
    finish = store.stage([CursorPut(ALICE.fingerprint, "d1", "r1", 0)], sync=False)
    unsynced = _synchronous(store)
    finish()
    finish = store.stage([RoomPut("r2")])
    synced = _synchronous(store)
    finish()
    store.close()
    assert (unsynced, synced) == (1, 2)


def test_an_unsynced_batch_survives_the_process_dying_at_once(tmp_path: Path) -> None:
    """A process that commits an unsynced batch and exits without closing anything: the batch
    is in the database when it is opened again (only an OS crash could take it back)."""
    path = tmp_path / "relay.db"
    store = SqliteStorage(path)
    store.commit(SCRIPT[0] + [OpAppended("r1", StoredOp(1, ALICE.fingerprint, "o1", b"x", 1.0))])
    store.close()
    crash = (
        "import os, sys\n"
        "from relay.sqlite_store import SqliteStorage\n"
        "from relay.storage import CursorPut, OpsPruned\n"
        "store = SqliteStorage(__import__('pathlib').Path(sys.argv[1]))\n"
        "store.stage([CursorPut(sys.argv[2], 'd1', 'r1', 1), OpsPruned('r1', 1)], sync=False)()\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", crash, str(path), ALICE.fingerprint], check=True)
    reopened = SqliteStorage(path)
    snapshot = reopened.load()
    reopened.close()
    assert [c.seq for c in snapshot.cursors] == [1]
    assert [op.seq for room in snapshot.rooms for op in room.ops] == []


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
