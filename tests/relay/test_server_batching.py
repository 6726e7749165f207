"""The shell's send path: frames queued for one connection go out joined, and stay whole and in
order; a stuck or vanished reader holds up nobody else. In-memory streams, autojump clock; the
committer's direct writes need a real socket, so their tests use a socket pair."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing
from trio_websocket import WebSocketConnection, wrap_client_stream
from wsproto.connection import Connection, ConnectionType
from wsproto.events import TextMessage

from crosstalk.wire import relay as w
from relay.http import ReplayStream, text_frame
from relay.server import WRITE_BYTES, RelayServer, ShellTimings
from relay.storage import MemoryStorage
from tests.relay.client import Identity, RelayClient, handshake, pair_and_room

TIMINGS = ShellTimings(ping_interval=600.0, ping_timeout=60.0, close_timeout=3.0,
                       connect_timeout=5.0, tick_interval=3600.0)


class GatedStream(trio.abc.Stream):
    """The relay's end of one connection: records every write, and can hold writes back."""

    def __init__(self, inner: trio.abc.Stream, peer: trio.abc.Stream) -> None:
        self.inner = inner
        self.peer = peer  # the client's end
        self.writes: list[bytes] = []
        self.gate = trio.Event()
        self.gate.set()
        self.holding = trio.Event()  # set once a write waits at the closed gate

    def close_gate(self) -> None:
        self.gate = trio.Event()
        self.holding = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if not self.gate.is_set():
            self.holding.set()
            await self.gate.wait()
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def _relay() -> AsyncIterator[tuple[RelayServer, trio.Nursery]]:
    server = RelayServer(MemoryStorage(), b"\x07" * 32, timings=TIMINGS)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, nursery
        nursery.cancel_scope.cancel()


async def _connect(
    server: RelayServer, nursery: trio.Nursery, client_end: trio.abc.Stream,
    server_end: trio.abc.Stream,
) -> RelayClient:
    nursery.start_soon(server.handle_stream, server_end)
    # trio-websocket annotates SocketStream but works over any trio Stream.
    ws: WebSocketConnection = await wrap_client_stream(
        nursery, client_end, "relay", "/ws"  # type: ignore[arg-type]
    )
    client = await handshake(ws, Identity(), "dev-1")
    await client.ok(w.Resume(client.next_req(), {}))
    return client


async def _member(
    server: RelayServer, nursery: trio.Nursery
) -> tuple[RelayClient, GatedStream]:
    client_end, server_end = trio.testing.memory_stream_pair()
    gated = GatedStream(server_end, client_end)
    return await _connect(server, nursery, client_end, gated), gated


async def _add(owner: RelayClient, other: RelayClient, room: str) -> None:
    slot = await owner.ok(w.SlotOpen(owner.next_req()))
    assert isinstance(slot, w.Slot)
    await other.ok(w.SlotJoin(other.next_req(), slot.slot))
    me, them = owner.me, other.me
    await owner.ok(w.Add(owner.next_req(), room, them.ed_pub, them.x_pub, me.vouch(room, them)))
    await other.ok(w.Accept(other.next_req(), room))


async def _post(
    a: RelayClient, room: str, count: int, size: int = 8, first: int = 0
) -> list[int]:
    """Post ops numbered ``first`` on, one at a time; their seqs."""
    seqs = []
    for i in range(first, first + count):
        posted = await a.ok(w.Post(a.next_req(), room, f"op-{i}", b"%08d" % i + b"x" * size))
        assert isinstance(posted, w.Posted)
        seqs.append(posted.seq)
    return seqs


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
def test_text_frames_parse_as_separate_messages_at_every_length_form(size: int) -> None:
    """Frames around each length encoding (7-bit, 16-bit, 64-bit) parse back whole and in order."""
    texts = ["é" * (size // 2) + "a" * (size % 2), "second", "x" * size]
    client = Connection(ConnectionType.CLIENT)
    client.receive_data(b"".join(text_frame(text) for text in texts))
    got = list(client.events())
    assert all(isinstance(e, TextMessage) and e.message_finished for e in got)
    assert [e.data for e in got if isinstance(e, TextMessage)] == texts


async def test_pushes_queued_for_one_connection_go_out_in_one_write_as_ordered_frames(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten pushes queued behind a held write leave in one write and arrive as ten frames."""
    async with _relay() as (server, nursery):
        a, _ = await _member(server, nursery)
        b, b_end = await _member(server, nursery)
        await pair_and_room(a, b, "r")
        b_end.close_gate()
        seqs = await _post(a, "r", 10)  # each committed and queued for b, whose write waits
        assert b_end.holding.is_set()
        before = len(b_end.writes)
        b_end.gate.set()
        ops = await b.ops(10)
        assert [op.seq for op in ops] == seqs
        assert [op.body[:8] for op in ops] == [b"%08d" % i for i in range(10)]
        assert len(b_end.writes) - before == 2  # the held first push, then the nine behind it


async def test_slow_reader_gets_every_frame_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A reader that takes one frame at a time, while ops keep coming, misses and swaps none."""
    count = 200
    async with _relay() as (server, nursery):
        a, _ = await _member(server, nursery)
        client_end, server_end = trio.testing.lockstep_stream_pair()  # no buffer: backpressure
        b = await _connect(server, nursery, client_end, server_end)
        await pair_and_room(a, b, "r")
        got: list[w.Op] = []

        async def read_slowly() -> None:
            while len(got) < count:
                got.extend(await b.ops(1))
                await trio.testing.wait_all_tasks_blocked()  # everything else runs first

        with trio.fail_after(60):
            async with trio.open_nursery() as inner:
                inner.start_soon(read_slowly)
                # Bodies of about 1 KiB: several capped writes' worth queue up.
                seqs = await _post(a, "r", count, size=1000)
        assert count * 1000 > 2 * WRITE_BYTES
        assert [op.seq for op in got] == seqs
        assert [op.body[:8] for op in got] == [b"%08d" % i for i in range(count)]


async def test_reader_gone_mid_write_stalls_no_other_connection(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A member whose peer vanishes while its write hangs is dropped; the others get every op."""
    async with _relay() as (server, nursery):
        a, _ = await _member(server, nursery)
        b, b_end = await _member(server, nursery)
        c, _ = await _member(server, nursery)
        await pair_and_room(a, b, "r")
        await _add(a, c, "r")
        b_end.close_gate()  # never opened again: b's write hangs for good
        seqs = await _post(a, "r", 1)
        await b_end.holding.wait()  # b's writer is mid-write
        await b_end.peer.aclose()  # ... and b's peer is gone
        with trio.fail_after(10):
            seqs += await _post(a, "r", 30, first=1)
            ops = await c.ops(31)
        assert [op.seq for op in ops] == seqs == list(range(1, 32))
        assert [op.body[:8] for op in ops] == [b"%08d" % i for i in range(31)]
        assert server.core.statistics().connections == 2


async def test_a_write_held_for_the_send_timeout_drops_that_connection_then(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A write that cannot finish is given up at ``send_timeout`` after it began, not before and
    not at the next ping: the heartbeat times writes, the writer opens no scope of its own."""
    async with _relay() as (server, nursery):
        a, _ = await _member(server, nursery)
        b, b_end = await _member(server, nursery)
        await pair_and_room(a, b, "r")
        await trio.sleep(17.0)  # off the grid of the connections' own checks
        b_end.close_gate()  # b's peer stops reading
        await _post(a, "r", 1)
        await b_end.holding.wait()
        began = trio.current_time()
        await trio.sleep_until(began + TIMINGS.send_timeout - 0.1)
        assert server.core.statistics().connections == 2
        await trio.sleep(0.2)
        assert server.core.statistics().connections == 1
        assert TIMINGS.send_timeout < TIMINGS.ping_interval  # the ping did not do it


def _socket_pair(buffer: int | None = None) -> tuple[trio.SocketStream, trio.SocketStream]:
    """Two ends of a real loopback TCP connection (the committer writes directly only to a
    socket), ours with a small send buffer and theirs with a small receive buffer if ``buffer``
    is given."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname())
        ours, _ = listener.accept()
    if buffer is not None:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    return (trio.SocketStream(trio.socket.from_stdlib_socket(ours)),
            trio.SocketStream(trio.socket.from_stdlib_socket(theirs)))


async def test_send_now_writes_at_once_what_the_socket_takes_and_only_with_the_lock_free() -> None:
    ours, theirs = _socket_pair(buffer=4096)
    stream = ReplayStream(ours, b"")
    assert stream.send_now(b"abc") == 3
    assert await theirs.receive_some() == b"abc"
    chunk = b"x" * 4096
    while (sent := stream.send_now(chunk)) == len(chunk):
        pass
    assert stream.send_now(chunk) == 0  # full: nothing taken, nothing lost
    async with trio.open_nursery() as nursery:
        nursery.start_soon(stream.send_all, b"held")  # waits for room, holding the lock
        await trio.testing.wait_all_tasks_blocked()
        assert stream.send_now(b"y") is None
        nursery.cancel_scope.cancel()
    assert sent is not None and sent < len(chunk)
    await ours.aclose()
    await theirs.aclose()
    memory = ReplayStream(trio.testing.memory_stream_pair()[0], b"")
    assert memory.send_now(b"abc") is None  # not a socket (TLS, say): the writer sends it


async def test_pushes_written_directly_and_the_tails_a_full_socket_left_arrive_in_order() -> None:
    """Ops to a member that does not read fill its socket: the part written directly, the tail
    the writer got, and every op committed behind that tail arrive whole and in order."""
    count = 300
    async with _relay() as (server, nursery):
        a_server, a_end = _socket_pair()
        a = await _connect(server, nursery, a_end, a_server)
        b_server, b_end = _socket_pair(buffer=8192)
        b = await _connect(server, nursery, b_end, b_server)
        await pair_and_room(a, b, "r")
        with trio.fail_after(60):
            seqs = await _post(a, "r", count, size=1000)  # b reads nothing meanwhile
            assert any(link.queued for link in server._links.values())  # a tail is waiting
            ops = await b.ops(count)
        assert [op.seq for op in ops] == seqs
        assert [op.body[:8] for op in ops] == [b"%08d" % i for i in range(count)]
    for end in (a_end, b_end):  # the relay closed its ends with the connections
        await end.aclose()
