"""A small relay client for tests and the bench: handshake, request/reply, pushes.

Not the daemon's relay link (that comes later, with reconnects and an outbox); just enough to
drive a real relay process over a real WebSocket.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio
from nacl.signing import SigningKey, VerifyKey
from trio_websocket import WebSocketConnection, wrap_client_stream

from crosstalk.crypto import do_work, fingerprint
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState, Statement, transcript
from crosstalk.wire.websocket import late_pongs_ignored

MEMBERSHIP = (w.Create, w.Add, w.Accept, w.Decline, w.Leave, w.Remove)


class Identity:
    """An identity key pair for tests (fresh random unless a seed is given)."""

    def __init__(self, seed: bytes | None = None) -> None:
        self.key = SigningKey(seed or os.urandom(32))
        self.ed_pub = bytes(self.key.verify_key)
        self.x_pub = bytes(self.key.to_curve25519_private_key().public_key)
        self.fp = fingerprint(self.ed_pub)

    def vouch(self, room: str, who: Identity) -> bytes:
        return self.key.sign(w.member_transcript(room, who.ed_pub, who.x_pub)).signature

    def statement(self, history: ChainState, kind: str, subject: str, ed_pub: bytes = b"",
                  x_pub: bytes = b"") -> Statement:
        """Our signed statement of a change, on ``history``'s newest head."""
        after, link = history.head()
        unsigned = Statement(history.room, kind, self.fp, subject, ed_pub, x_pub, after, link)
        return attrs.evolve(unsigned, sig=self.key.sign(transcript(unsigned)).signature)


class RelayClient:
    """One authenticated connection. Replies are matched by ``req``; the rest are pushes."""

    def __init__(self, ws: WebSocketConnection, me: Identity, challenge: w.Challenge) -> None:
        self.ws = ws
        self.me = me
        self.challenge = challenge
        self.pushes: list[w.RelayFrame] = []
        self.resumed: w.Resumed | None = None
        self.paying = True
        self._req = itertools.count(1)

    def next_req(self) -> int:
        return next(self._req)

    async def recv(self) -> w.RelayFrame:
        return w.decode_relay_frame(await self.ws.get_message())

    async def send(self, frame: w.ClientFrame) -> None:
        await self.ws.send_message(w.encode_frame(frame))

    async def history(self, room: str) -> ChainState:
        """The room's membership history as the relay gives it (empty if we cannot see it)."""
        reply = await self.request(w.GetRoster(self.next_req(), room, 0))
        if not isinstance(reply, w.Roster):
            return ChainState(room)
        return ChainState.replay(room, reply.chain, verify=False)

    async def signed(self, frame: w.ClientFrame) -> w.ClientFrame:
        """A membership request with the statement an honest client signs (unless it has one)."""
        if not isinstance(frame, MEMBERSHIP) or frame.stmt is not None:
            return frame
        me = self.me
        if isinstance(frame, w.Create):
            stmt = me.statement(ChainState(frame.room), "create", me.fp, me.ed_pub, me.x_pub)
        elif isinstance(frame, w.Add):
            stmt = me.statement(await self.history(frame.room), "invite",
                                fingerprint(frame.ed_pub), frame.ed_pub, frame.x_pub)
        elif isinstance(frame, w.Remove):
            stmt = me.statement(await self.history(frame.room), "remove", frame.fingerprint)
        else:
            kind = {w.Accept: "accept", w.Decline: "decline", w.Leave: "leave"}[type(frame)]
            stmt = me.statement(await self.history(frame.room), kind, me.fp)
        return attrs.evolve(frame, stmt=stmt)  # type: ignore[arg-type]

    async def request(self, frame: w.ClientFrame) -> w.RelayFrame:
        """Send a request and return its reply; pushes arriving first go to ``pushes``.

        A membership request without a statement gets an honest one (see :meth:`signed`); a
        slot open or join without a proof of work first pays what the relay asks (as the daemon
        does), unless ``paying`` is off.
        """
        frame = await self.signed(frame)
        if self.paying and isinstance(frame, w.SlotOpen | w.SlotJoin) and not frame.work:
            slot = frame.slot if isinstance(frame, w.SlotJoin) else ""
            ask = await self.request(w.WorkAsk(self.next_req(), slot))
            assert isinstance(ask, w.Work), ask
            frame = attrs.evolve(frame, work=do_work(ask.seed, ask.bits))
        await self.send(frame)
        req = getattr(frame, "req", None)
        while True:
            got = await self.recv()
            if getattr(got, "req", None) == req and req is not None:
                return got
            self.pushes.append(got)

    async def ok(self, frame: w.ClientFrame) -> w.RelayFrame:
        reply = await self.request(frame)
        assert not isinstance(reply, w.Error), reply
        return reply

    async def push(self, cls: type) -> w.RelayFrame:
        """The next push of type ``cls`` (earlier buffered ones first)."""
        for i, frame in enumerate(self.pushes):
            if isinstance(frame, cls):
                return self.pushes.pop(i)
        while True:
            got = await self.recv()
            if isinstance(got, cls):
                return got
            self.pushes.append(got)

    async def ops(self, count: int) -> list[w.Op]:
        out = []
        for _ in range(count):
            op = await self.push(w.Op)
            assert isinstance(op, w.Op)
            out.append(op)
        return out


async def handshake(ws: WebSocketConnection, me: Identity, device: str) -> RelayClient:
    """Answer the challenge and check the relay's signed ready."""
    challenge = w.decode_relay_frame(await ws.get_message())
    assert isinstance(challenge, w.Challenge)
    transcript = w.hello_transcript(
        challenge.nonce, challenge.relay_key, me.ed_pub, me.x_pub, device, w.PROTOCOL_VERSION
    )
    hello = w.Hello(me.ed_pub, me.x_pub, device, w.PROTOCOL_VERSION,
                    me.key.sign(transcript).signature)
    await ws.send_message(w.encode_frame(hello))
    ready = w.decode_relay_frame(await ws.get_message())
    assert isinstance(ready, w.Ready), ready
    assert ready.fingerprint == me.fp
    expected = w.ready_transcript(challenge.nonce, challenge.relay_key, me.ed_pub, me.x_pub)
    VerifyKey(challenge.relay_key).verify(expected, ready.sig)
    return RelayClient(ws, me, challenge)


@asynccontextmanager
async def open_ws(
    port: int, host: str = "127.0.0.1", *, connect_within: float = 5.0,
    local_address: str | None = None,
) -> AsyncIterator[WebSocketConnection]:
    """A client WebSocket to ``/ws`` whose TCP stream we close ourselves.

    trio-websocket 0.12's client never closes its stream when the server closes first (its
    reader stops at EOF in the CLOSED state and ``aclose`` returns early), which leaks a socket.
    Its reader also answers a ping that arrives after our close frame went out, which wsproto
    refuses with ``LocalProtocolError``; the socket is closing anyway, so that one is ignored.
    """
    with trio.fail_after(connect_within):
        stream = await trio.open_tcp_stream(host, port, local_address=local_address)
    try:
        with late_pongs_ignored():
            async with trio.open_nursery() as nursery:
                with trio.fail_after(connect_within):
                    ws = await wrap_client_stream(nursery, stream, host, "/ws")
                try:
                    yield ws
                finally:
                    with trio.move_on_after(2) as scope:
                        scope.shield = True
                        await ws.aclose()
                    nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()


@asynccontextmanager
async def open_client(
    port: int, me: Identity, *, device: str = "dev-1", resume: dict[str, int] | None = None,
    host: str = "127.0.0.1",
) -> AsyncIterator[RelayClient]:
    """Connect, authenticate and resume from ``resume`` (default: no cursors, live from now)."""
    async with open_ws(port, host) as ws:
        client = await handshake(ws, me, device)
        reply = await client.ok(w.Resume(client.next_req(), resume or {}))
        assert isinstance(reply, w.Resumed)
        client.resumed = reply
        yield client


async def pair_and_room(a: RelayClient, b: RelayClient, room: str) -> None:
    """Pair ``a`` and ``b`` through a slot, then put both in ``room`` (joined)."""
    slot = await a.ok(w.SlotOpen(a.next_req()))
    assert isinstance(slot, w.Slot)
    await b.ok(w.SlotJoin(b.next_req(), slot.slot))
    await a.ok(w.Create(a.next_req(), room, a.me.vouch(room, a.me)))
    await a.ok(w.Add(a.next_req(), room, b.me.ed_pub, b.me.x_pub, a.me.vouch(room, b.me)))
    await b.ok(w.Accept(b.next_req(), room))
    await a.ok(w.SlotClose(a.next_req(), slot.slot))

