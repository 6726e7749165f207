"""The storage contract, run over SQLite and NATS JetStream alike (MemoryStorage is the model)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trio

from crosstalk.errors import StorageUnavailable
from relay.nats_store import FETCH_BATCH, NatsStorage
from relay.sqlite_store import SqliteStorage
from relay.storage import (
    MemberPut,
    MemoryStorage,
    OpAppended,
    OpsPruned,
    RelayStorage,
    RoomDeleted,
    RoomPut,
    Snapshot,
    StoredOp,
)
from tests.relay.harness import WallClock
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.test_storage import ALICE, BOB, SCRIPT

Opener = Callable[[], RelayStorage]
_names = itertools.count()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path_factory.mktemp("nats"))


@pytest.fixture
def wall() -> WallClock:
    """The wall clock every store the opener makes reads (slot and grant expiry)."""
    return WallClock(1_000.0)


@pytest.fixture(params=["sqlite", "nats"])
def opener(request: pytest.FixtureRequest, tmp_path: Path, wall: WallClock) -> Iterator[Opener]:
    """Opens the same store again and again (a restart); every store opened is closed after."""
    opened: list[RelayStorage] = []
    if request.param == "sqlite":
        def make() -> RelayStorage:
            return SqliteStorage(tmp_path / "relay.db", clock=wall)
    else:
        server: NatsServer = request.getfixturevalue("nats_server")
        namespace = f"st{next(_names)}"

        def make() -> RelayStorage:
            return NatsStorage(server.url, namespace=namespace, timeout=5.0, clock=wall)

    def tracked() -> RelayStorage:
        store = make()
        opened.append(store)
        return store

    yield tracked
    for store in opened:
        store.close()


def normal(snapshot: Snapshot) -> Snapshot:
    """Order-free form: backends may list members, devices and cursors in any order."""
    rooms = [
        type(r)(r.room, r.head, sorted(r.members, key=lambda m: m.fingerprint), r.ops,
                r.departed_ops)
        for r in sorted(snapshot.rooms, key=lambda r: r.room)
    ]
    return Snapshot(rooms, sorted(snapshot.devices, key=repr), sorted(snapshot.cursors, key=repr))


def test_backend_matches_memory_model_and_survives_reopen(opener: Opener) -> None:
    """The same writes give the memory model's snapshot, before and after reopening."""
    memory, store = MemoryStorage(), opener()
    for batch in SCRIPT:
        memory.commit(batch)
        store.commit(batch)
    assert normal(store.load()) == normal(memory.load())
    store.close()
    snapshot = opener().load()
    assert normal(snapshot) == normal(memory.load())
    [room] = snapshot.rooms
    assert (room.head, [op.seq for op in room.ops]) == (5, [3, 4, 5])
    assert room.departed_ops == {BOB.fingerprint: {"o4": 4, "o5": 5}}


def test_pruning_every_op_keeps_the_head_and_the_sequence_continues(opener: Opener) -> None:
    """A fully pruned log still reports its head, and the next append follows it."""
    store = opener()
    ops = [OpAppended("r", StoredOp(i, ALICE.fingerprint, f"o{i}", b"x", 1.0)) for i in (1, 2)]
    store.commit([RoomPut("r"), MemberPut("r", ALICE), *ops, OpsPruned("r", 2)])
    store.commit([OpAppended("r", StoredOp(3, ALICE.fingerprint, "o3", b"y", 2.0))])
    [room] = opener().load().rooms
    assert (room.head, [op.op_id for op in room.ops]) == (3, ["o3"])


def test_recreated_room_starts_empty(opener: Opener) -> None:
    """A room deleted and created again in one batch has no old members, ops or head."""
    store = opener()
    old = StoredOp(1, ALICE.fingerprint, "old", b"x", 1.0)
    store.commit([RoomPut("r"), MemberPut("r", ALICE), MemberPut("r", BOB), OpAppended("r", old)])
    store.commit([RoomDeleted("r"), RoomPut("r"), MemberPut("r", BOB)])
    [room] = opener().load().rooms
    members = [m.fingerprint for m in room.members]
    assert (room.head, room.ops, members) == (0, [], [BOB.fingerprint])


def test_large_op_body_and_odd_op_id_round_trip(opener: Opener) -> None:
    """A 1 MiB body and an op id with spaces and newlines come back byte for byte."""
    store = opener()
    op = StoredOp(1, ALICE.fingerprint, "a b\nc:d", bytes(range(256)) * 4096, 12.5)
    store.commit([RoomPut("r"), MemberPut("r", ALICE), OpAppended("r", op)])
    assert opener().load().rooms[0].ops == [op]


def test_nats_room_without_its_room_key_is_ignored_then_cleared(nats_server: NatsServer) -> None:
    """Keys left by a torn batch (no ``room.<id>``) are not a room, and a new room drops them."""
    store = NatsStorage(nats_server.url, namespace=f"torn{next(_names)}")
    try:
        store.commit([MemberPut("r", ALICE), OpAppended("r", StoredOp(7, "x", "o", b"x", 1.0))])
        assert store.load().rooms == []
        store.commit([RoomPut("r")])
        [room] = store.load().rooms
        assert (room.head, room.members, room.ops) == (0, [], [])
    finally:
        store.close()


def test_unreachable_nats_is_storage_unavailable_within_the_timeout(tmp_path: Path) -> None:
    """No server: the constructor raises StorageUnavailable instead of hanging."""
    with pytest.raises(StorageUnavailable):
        NatsStorage("nats://127.0.0.1:1", namespace="none", timeout=1.0)


async def test_nats_a_load_and_a_reload_read_past_one_fetch_batch(nats_server: NatsServer) -> None:
    """A scan takes more than one batch from its consumer (FETCH_BATCH messages each): a room
    with more ops than that comes back whole, by the first load and by a node's reload, which
    reads through the node's own connection."""
    store = NatsStorage(nats_server.url, namespace=f"big{next(_names)}")
    count = FETCH_BATCH * 2 + 7
    ops = [OpAppended("r", StoredOp(i, ALICE.fingerprint, f"o{i}", b"x", 1.0))
           for i in range(1, count + 1)]
    try:
        store.commit([RoomPut("r"), MemberPut("r", ALICE), *ops])
        [room] = store.load().rooms
        assert (room.head, [op.seq for op in room.ops]) == (count, list(range(1, count + 1)))
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                await nursery.start(store.run_connection)
                snapshot, tails = await store.areload("r.r")
                nursery.cancel_scope.cancel()
        assert [op.seq for op in snapshot.rooms[0].ops] == list(range(1, count + 1))
        assert tails.last["r.r"] == store.tails.last["r.r"]
    finally:
        store.close()
