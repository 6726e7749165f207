"""How the shell commits a staged storage's batches: an op (or anything else that is answered or
pushed) waits for the disk on the committer's thread; acknowledgements alone do not, and what a
crash can then take back is only ever delivered again. In-memory streams and a storage that
keeps each commit with whether it was synced; real clock (the commit thread is a real thread)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import attrs
import trio
import trio.testing
from trio_websocket import WebSocketConnection, wrap_client_stream

from crosstalk.wire import relay as w
from relay.server import INLINE_SYNC_WRITES, RelayServer, ShellTimings
from relay.storage import (
    CursorPut,
    DevicePut,
    MemoryStorage,
    OpAppended,
    OpsPruned,
    RelayStorage,
    Snapshot,
    Write,
)
from tests.relay.client import Identity, RelayClient, handshake, pair_and_room

TIMINGS = ShellTimings(ping_interval=600.0, ping_timeout=60.0, close_timeout=3.0,
                       connect_timeout=5.0, tick_interval=3600.0)
SEED = b"\x0b" * 32
WITHIN = 10.0  # seconds: a bound on each scenario, never reached when it passes


@attrs.frozen
class Commit:
    writes: list[Write]
    synced: bool
    thread: str  # the thread that finished it


class DiskStorage:
    """A staged storage, empty at start, with SQLite's promise in WAL mode: an unsynced commit
    survives the process, but a power cut takes back every unsynced commit after the last synced
    one (and only those)."""

    def __init__(self) -> None:
        self.commits: list[Commit] = []

    def load(self) -> Snapshot:
        return Snapshot()

    def stage(self, writes: Sequence[Write], *, sync: bool = True) -> Callable[[], None]:
        def finish() -> None:
            self.commits.append(Commit(list(writes), sync, threading.current_thread().name))
        return finish

    def commit(self, writes: Sequence[Write]) -> None:
        self.stage(writes)()

    def close(self) -> None:
        pass

    def after_power_cut(self) -> MemoryStorage:
        """What a restart would find if the power went now."""
        synced = [i for i, c in enumerate(self.commits) if c.synced]
        disk = MemoryStorage()
        for kept in self.commits[: synced[-1] + 1 if synced else 0]:
            disk.commit(kept.writes)
        return disk


@asynccontextmanager
async def _relay(storage: RelayStorage) -> AsyncIterator[tuple[RelayServer, trio.Nursery]]:
    server = RelayServer(storage, SEED, timings=TIMINGS)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, nursery
        nursery.cancel_scope.cancel()


async def _client(
    server: RelayServer, nursery: trio.Nursery, me: Identity, device: str = "dev-1"
) -> RelayClient:
    """Connect and resume naming no cursor (so a replay starts at the relay's cursor)."""
    client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle_stream, server_end)
    # trio-websocket annotates SocketStream but works over any trio Stream.
    ws: WebSocketConnection = await wrap_client_stream(
        nursery, client_end, "relay", "/ws"  # type: ignore[arg-type]
    )
    client = await handshake(ws, me, device)
    await client.ok(w.Resume(client.next_req(), {}))
    return client


async def _post(a: RelayClient, body: bytes) -> int:
    posted = await a.ok(w.Post(a.next_req(), "r", body.decode(), body))
    assert isinstance(posted, w.Posted)
    return posted.seq


async def _ack(b: RelayClient, seq: int) -> None:
    """Acknowledge ``seq``; return once its batch is committed (an ack has no answer, but the
    next request's answer is dispatched only after every batch before it)."""
    await b.send(w.Ack("r", seq))
    await b.ok(w.ListRooms(b.next_req()))


def _kinds(commit: Commit) -> set[type]:
    return {type(write) for write in commit.writes}


async def test_acks_alone_skip_the_fsync_and_everything_else_waits_for_it() -> None:
    """A post's batch and a new device's (with its first cursors) are synced: on the loop while
    the batch is small, on the commit thread past INLINE_SYNC_WRITES; a batch of
    acknowledgements alone is committed unsynced, on the loop."""
    disk = DiskStorage()
    loop = threading.current_thread().name
    with trio.fail_after(WITHIN):
        async with _relay(disk) as (server, nursery):
            a = await _client(server, nursery, Identity())
            b = await _client(server, nursery, Identity())
            await pair_and_room(a, b, "r")
            mark = len(disk.commits)
            await _post(a, b"one")
            [op] = await b.ops(1)
            await _ack(b, op.seq)
            await _client(server, nursery, b.me, "dev-2")
            for n in range(INLINE_SYNC_WRITES):  # a's new device will start a cursor in each
                await a.ok(w.Create(a.next_req(), f"more-{n}", a.me.vouch(f"more-{n}", a.me)))
            await _client(server, nursery, a.me, "dev-2")
    post, ack, device = disk.commits[mark:mark + 3]
    assert _kinds(post) == {OpAppended}
    assert (post.synced, post.thread) == (True, loop)
    assert _kinds(ack) == {CursorPut}
    assert (ack.synced, ack.thread) == (False, loop)
    assert _kinds(device) == {DevicePut, CursorPut}
    assert (device.synced, device.thread) == (True, loop)
    big = disk.commits[-1]
    assert _kinds(big) == {DevicePut, CursorPut} and len(big.writes) > INLINE_SYNC_WRITES
    assert (big.synced, big.thread) == (True, "relay commit")


async def test_an_ack_lost_to_a_power_cut_means_a_redelivery_and_nothing_else() -> None:
    """The power goes after the acks of an op (unsynced): the op is still held and b's cursor
    is back before it, so b gets it again. Once the next post is synced, the acks are durable
    with it: b gets only the new op, and the acknowledged one is pruned."""
    disk = DiskStorage()
    ana, ben = Identity(), Identity()
    with trio.fail_after(WITHIN):
        async with _relay(disk) as (server, nursery):
            a = await _client(server, nursery, ana)
            b = await _client(server, nursery, ben)
            await pair_and_room(a, b, "r")
            first = await _post(a, b"one")
            await _ack(a, first)
            await b.ops(1)
            await _ack(b, first)  # every device has it: pruned
            assert _kinds(disk.commits[-1]) == {CursorPut, OpsPruned}
            lost = disk.after_power_cut()
            second = await _post(a, b"two")
            kept = disk.after_power_cut()
    for storage, expected in ((lost, [(first, b"one")]), (kept, [(second, b"two")])):
        with trio.fail_after(WITHIN):
            async with _relay(storage) as (server, nursery):
                again = await _client(server, nursery, ben)
                got = await again.ops(len(expected))
                assert [(op.seq, op.body) for op in got] == expected
                await again.ok(w.ListRooms(again.next_req()))  # after any further replay
                assert not [f for f in again.pushes if isinstance(f, w.Op)]
        held = [op.seq for room in storage.load().rooms for op in room.ops]
        assert held == [seq for seq, _ in expected]
