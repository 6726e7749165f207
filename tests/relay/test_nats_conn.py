"""The Trio NATS connection (relay/nats_conn.py) against a scripted server on memory streams."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import attrs
import pytest
import trio
import trio.testing

from crosstalk.errors import NatsServerTooOld, StorageUnavailable
from relay import nats_wire as wire
from relay.nats_conn import NatsConnection


@attrs.frozen
class Published:
    subject: str
    reply: str | None
    payload: bytes
    headers: bytes | None


@attrs.define
class FakeServer:
    """Speaks the server's side of the protocol on each stream the client opens; what the
    client sends is recorded in order, and ``answer`` decides the reply to each publish."""

    version: str = "2.15.1"
    answer: Callable[[Published], bytes | None] = lambda _: None
    muted: int | None = None  # the connection (by number) whose PINGs go unanswered
    stalled: int | None = None  # the connection (by number) the server stops reading
    lockstep: bool = False  # a write waits for the other side to read, as on a full socket
    commands: list[object] = attrs.Factory(list)
    streams: list[trio.testing.MemoryStreamPair] = attrs.Factory(list)  # type: ignore[name-defined]
    opened: int = 0
    nursery: trio.Nursery | None = None
    subs: dict[str, str] = attrs.Factory(dict)  # sid -> subject
    stream_opened: trio.Event = attrs.Factory(trio.Event)  # replaced once set
    connects: list[dict[str, object]] = attrs.Factory(list)  # each CONNECT's options
    reading: dict[int, trio.CancelScope] = attrs.Factory(dict)  # each connection's pending read

    def stall(self, number: int) -> None:
        """Stop reading connection ``number`` now, even a read already waiting for data."""
        self.stalled = number
        if number in self.reading:
            self.reading[number].cancel()

    async def open_stream(self, url: str) -> trio.abc.Stream:
        assert self.nursery is not None
        testing = trio.testing
        pair = testing.lockstep_stream_pair if self.lockstep else testing.memory_stream_pair
        client, server = pair()
        self.opened += 1
        self.stream_opened.set()
        self.stream_opened = trio.Event()
        self.streams.append(server)
        self.nursery.start_soon(self.serve, server, len(self.streams) - 1)
        return client

    async def serve(self, stream: trio.abc.Stream, number: int) -> None:
        info = {"server_id": "S", "version": self.version, "max_payload": 1024, "headers": True}
        await stream.send_all(b"INFO " + json.dumps(info).encode() + b"\r\n")
        buffer = b""
        try:
            while True:
                if number == self.stalled:
                    await trio.sleep_forever()
                data = None
                with trio.CancelScope() as self.reading[number]:
                    data = await stream.receive_some()
                if data is None:
                    continue  # stalled while waiting: nothing was taken from the client
                if not data:
                    return
                buffer += data
                buffer = await self._commands(stream, buffer, number)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def _commands(self, stream: trio.abc.Stream, buffer: bytes, number: int) -> bytes:
        while b"\r\n" in buffer:
            line, rest = buffer.split(b"\r\n", 1)
            op, *args = line.split(b" ")
            if op in (b"PUB", b"HPUB"):
                sizes = 2 if op == b"HPUB" else 1
                total = int(args[-1])
                if len(rest) < total + 2:
                    return buffer
                body, rest = rest[:total], rest[total + 2:]
                split = int(args[-2]) if sizes == 2 else 0
                reply = args[1].decode() if len(args) == 2 + sizes else None
                pub = Published(args[0].decode(), reply, body[split:],
                                body[:split] if sizes == 2 else None)
                self.commands.append(pub)
                answer = self.answer(pub)
                if answer is not None and reply is not None:
                    await stream.send_all(b"MSG %s 1 %d\r\n%s\r\n" % (reply.encode(), len(answer),
                                                                     answer))
            elif op == b"PING":
                self.commands.append("PING")
                if number != self.muted:
                    await stream.send_all(b"PONG\r\n")
            elif op == b"SUB":
                self.subs[args[1].decode()] = args[0].decode()
                self.commands.append(("SUB", args[0].decode()))
            elif op == b"CONNECT":
                self.commands.append("CONNECT")
                self.connects.append(json.loads(line[len(b"CONNECT "):]))
            else:
                self.commands.append(op.decode())
            buffer = rest
        return buffer

    async def deliver(self, subject: str, payload: bytes) -> None:
        """Send a message to every subscription of the newest connection matching exactly."""
        for sid, wanted in self.subs.items():
            if wanted == subject:
                await self.streams[-1].send_all(
                    b"MSG %s %s %d\r\n%s\r\n" % (subject.encode(), sid.encode(), len(payload),
                                                 payload))


@asynccontextmanager
async def connected(server: FakeServer, url: str = "nats://fake:4222",
                    **kwargs: object) -> AsyncIterator[NatsConnection]:
    async with trio.open_nursery() as nursery:
        server.nursery = nursery
        conn = NatsConnection(url, open_stream=server.open_stream,
                              **kwargs)  # type: ignore[arg-type]
        await nursery.start(conn.run)
        yield conn
        nursery.cancel_scope.cancel()


def ack(seq: int) -> Callable[[Published], bytes]:
    return lambda _: json.dumps({"stream": "s", "seq": seq}).encode()


async def test_connect_sends_connect_with_headers_and_subscriptions_then_ping() -> None:
    """CONNECT asks for headers and no-responders; the inbox and every subscription are
    subscribed before the PING whose PONG ends the handshake."""
    server = FakeServer()
    async with connected(server) as conn:
        assert conn.info is not None and conn.info.version == "2.15.1"
    connect, inbox, ping = server.commands[:3]
    assert connect == "CONNECT"
    assert isinstance(inbox, tuple) and inbox[1].startswith("_INBOX.")
    assert ping == "PING"


async def test_a_request_gets_its_own_reply_among_several() -> None:
    """Replies are matched to requests by their inbox token, whatever the order."""
    server = FakeServer(answer=lambda p: p.payload.upper())
    async with connected(server) as conn:
        got: dict[bytes, bytes] = {}

        async def ask(body: bytes) -> None:
            got[body] = (await conn.request("svc", body)).payload

        async with trio.open_nursery() as nursery:
            for body in (b"a", b"b", b"c"):
                nursery.start_soon(ask, body)
    assert got == {b"a": b"A", b"b": b"B", b"c": b"C"}


async def test_a_request_with_headers_goes_out_as_hpub() -> None:
    """Headers travel in an HPUB's header block."""
    server = FakeServer(answer=ack(1))
    async with connected(server) as conn:
        await conn.request("s.x", b"p", {"Nats-Expected-Last-Subject-Sequence": "4"})
    [pub] = [c for c in server.commands if isinstance(c, Published)]
    assert pub.headers is not None
    assert wire.parse_headers(pub.headers).fields == {"Nats-Expected-Last-Subject-Sequence": "4"}


async def test_an_unanswered_request_fails_at_its_bound(autojump_clock: trio.abc.Clock) -> None:
    """No reply: StorageUnavailable after exactly the request's limit."""
    server = FakeServer()
    async with connected(server, timeout=5.0) as conn:
        start = trio.current_time()
        with pytest.raises(StorageUnavailable):
            await conn.request("svc", b"x", limit=1.5)
        assert trio.current_time() - start == pytest.approx(1.5)
        assert conn.statistics()["requests_waiting"] == 0


async def test_a_broken_connection_fails_requests_in_flight_and_reconnects(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The server goes away mid-request: the request fails at once (its outcome is unknown),
    the client connects again, subscribes again, says so, and the next request works."""
    server = FakeServer()
    reconnected: list[float] = []
    async with connected(server, on_reconnect=lambda: reconnected.append(1.0)) as conn:
        heard: list[bytes] = []
        conn.subscribe("feed.>", lambda m: heard.append(m.payload))
        await trio.testing.wait_all_tasks_blocked()

        async def break_soon() -> None:
            await trio.testing.wait_all_tasks_blocked()
            await server.streams[-1].aclose()

        start = trio.current_time()
        async with trio.open_nursery() as side:
            side.start_soon(break_soon)
            with pytest.raises(StorageUnavailable, match="outcome"):
                await conn.request("svc", b"x", limit=30.0)
        assert trio.current_time() - start < 1.0
        server.answer = ack(9)
        reply = await conn.request("svc", b"y")
        assert json.loads(reply.payload)["seq"] == 9
        assert server.opened == 2 and reconnected == [1.0]
        assert ("SUB", "feed.>") in server.commands[server.commands.index("PING") + 1:]
        await server.deliver("feed.>", b"after")
        await trio.testing.wait_all_tasks_blocked()
        assert heard == [b"after"]


async def test_a_server_that_stops_answering_pings_is_left(
    autojump_clock: trio.abc.Clock,
) -> None:
    """Two PINGs unanswered at a 2 s interval: the connection is taken for dead at the third
    beat (6 s) and a new one is opened."""
    server = FakeServer()
    back = trio.Event()
    async with connected(server, ping_interval=2.0, max_outstanding_pings=2,
                         on_reconnect=back.set) as conn:
        server.muted = 0
        start = trio.current_time()
        await server.stream_opened.wait()
        assert trio.current_time() - start == pytest.approx(6.0, abs=0.1)
        await back.wait()
        assert conn.reconnects == 1


async def test_the_client_answers_the_servers_ping() -> None:
    """A PING from the server gets a PONG (else the server drops the client)."""
    server = FakeServer()
    async with connected(server):
        client_side = server.streams[-1]
        await client_side.send_all(b"PING\r\n")
        await trio.testing.wait_all_tasks_blocked()
    assert server.commands.count("PONG") == 1


async def test_a_server_older_than_the_minimum_is_refused() -> None:
    """The version gate holds on the Trio client too: NatsServerTooOld, no connection."""
    server = FakeServer(version="2.9.10")
    async with trio.open_nursery() as nursery:
        server.nursery = nursery
        conn = NatsConnection("nats://fake:4222", open_stream=server.open_stream)
        with pytest.raises(NatsServerTooOld, match=r"2\.9\.10"):
            await nursery.start(conn.run)
        nursery.cancel_scope.cancel()


async def test_a_publish_waits_for_the_connection_within_its_bound(
    autojump_clock: trio.abc.Clock,
) -> None:
    """While disconnected a publish waits for the connection, and gives up at the timeout."""
    server = FakeServer()
    async with connected(server, timeout=3.0, ping_interval=1.0, max_outstanding_pings=1) as conn:
        server.muted = 0

        reconnecting = trio.Event()

        async def never(url: str) -> trio.abc.Stream:
            reconnecting.set()
            await trio.sleep_forever()
            raise AssertionError

        conn._open_stream = never
        await reconnecting.wait()
        start = trio.current_time()
        with pytest.raises(StorageUnavailable, match="not connected"):
            await conn.publish("a", b"x")
        assert trio.current_time() - start == pytest.approx(3.0)


@pytest.mark.parametrize(("url", "credentials"), [
    ("nats://relay:s%40cret@fake:4222", {"user": "relay", "pass": "s@cret"}),
    ("nats://T0KEN@fake:4222", {"auth_token": "T0KEN"}),
    ("nats://fake:4222", {}),
])
async def test_connect_carries_the_urls_credentials(url: str, credentials: dict[str, str]) -> None:
    """A URL's user and password (or token) go into CONNECT, as deploy.md's --nats has them."""
    server = FakeServer()
    async with connected(server, url):
        pass
    [options] = server.connects
    assert {k: options[k] for k in ("user", "pass", "auth_token") if k in options} == credentials
    assert options["headers"] is True and options["no_responders"] is True


async def test_a_write_cut_short_by_its_timeout_drops_the_connection(
    autojump_clock: trio.abc.Clock,
) -> None:
    """The server stops reading, so a request's write blocks; at its bound the request fails,
    and since half a command may be on the wire the client connects again."""
    server = FakeServer(lockstep=True)
    back = trio.Event()
    async with connected(server, on_reconnect=back.set) as conn:
        # Nothing else is being written when the server stops reading (the handshake's and the
        # subscriptions' writes are done), so the request's own write is the one that blocks.
        await trio.testing.wait_all_tasks_blocked()
        server.stall(0)
        start = trio.current_time()
        with pytest.raises(StorageUnavailable):
            await conn.request("svc", b"x", limit=1.0)
        assert trio.current_time() - start == pytest.approx(1.0)
        await back.wait()
        assert trio.current_time() - start < 2.0  # dropped then, not by the pinger (6 s)
        server.answer = ack(3)
        assert json.loads((await conn.request("svc", b"y")).payload)["seq"] == 3
