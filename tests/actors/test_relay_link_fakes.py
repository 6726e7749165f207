"""Fakes for the relay-link actor tests: an in-memory relay and an in-memory link store.

:class:`FakeRelay` runs the real relay core (``relay.core.RelayCore``) behind memory-channel
"sockets", so the handshake, rooms, log and cursors behave as the real relay's do, with no socket
in flight (autojump_clock needs that). It records every frame a client sends, with its virtual
time, and can refuse connections, drop them, freeze (stop answering pings), or stop taking
what clients send (``sends_hang``).

:class:`MemoryLinkStore` keeps the link's durable state in dicts; each commit takes
``commit_delay`` virtual seconds and is recorded with the time it completed.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TypeVar

import attrs
import trio
from nacl.signing import SigningKey
from trio_websocket import ConnectionClosed

from crosstalk import crypto
from crosstalk.actors.relay_link import (
    LinkCommand,
    LinkOutput,
    LinkTimings,
    RelayLink,
    RelaySocket,
)
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.link import OutboxItem
from crosstalk.errors import CrosstalkError
from crosstalk.store.link import LinkSnapshot
from crosstalk.wire import relay as w
from relay.core import RelayCore
from relay.effects import Close, Send
from relay.limits import RelayConfig

URL = "ws://fake-relay"


@attrs.frozen
class Heard:
    """One frame a client sent, when, and on which connection."""

    at: float
    conn: int
    frame: w.ClientFrame


class FakeSocket:
    """One client connection to the :class:`FakeRelay`."""

    def __init__(self, relay: FakeRelay, conn: int) -> None:
        self.relay = relay
        self.conn = conn
        self.closed = False
        self._send, self._receive = trio.open_memory_channel[str | None](1000)

    def deliver(self, text: str | None) -> None:
        if not self.closed:
            self._send.send_nowait(text)

    async def get_message(self) -> str:
        text = await self._receive.receive()
        if text is None:
            self.closed = True
            raise ConnectionClosed(None)
        return text

    async def send_message(self, message: str) -> None:
        if self.relay.sends_hang:
            await trio.sleep_forever()  # a socket whose send buffer stays full
        await trio.lowlevel.checkpoint()
        if self.closed:
            raise ConnectionClosed(None)
        self.relay.received(self.conn, message)

    async def ping(self) -> None:
        if self.relay.frozen:
            await trio.sleep_forever()
        await trio.lowlevel.checkpoint()


class FakeRelay:
    """The real relay core on memory channels (see the module docstring)."""

    def __init__(self, seed: bytes = b"\x09" * 32) -> None:
        self.key = SigningKey(seed)
        self.pub = bytes(self.key.verify_key)
        # No proof of work: it would run on a thread, outside the tests' virtual clock.
        self.core = RelayCore(signing_key=self.key, draw=random.Random(7).randbytes,
                              config=RelayConfig(slot_work_bits=0))
        self.sockets: dict[int, FakeSocket] = {}
        self.heard: list[Heard] = []
        self.connects: list[float] = []
        self.accepting = True
        self.frozen = False
        self.sends_hang = False
        self._next = 0

    def received(self, conn: int, text: str) -> None:
        self.heard.append(Heard(trio.current_time(), conn, w.decode_client_frame(text)))
        self._apply(self.core.frame_received(conn, text, trio.current_time()))

    def _apply(self, effects: Sequence[object]) -> None:
        for effect in effects:
            if isinstance(effect, Send) and effect.conn in self.sockets:
                self.sockets[effect.conn].deliver(w.encode_frame(effect.frame))
            elif isinstance(effect, Close) and effect.conn in self.sockets:
                self.sockets[effect.conn].deliver(None)

    def inject(self, text: str) -> None:
        """Send ``text`` to every client as if the relay had written it."""
        for sock in self.sockets.values():
            sock.deliver(text)

    def drop_all(self) -> None:
        """Close every connection from the relay's side."""
        for sock in self.sockets.values():
            sock.deliver(None)

    def frames(self, kind: type, device: str | None = None) -> list[Heard]:
        """What clients sent of ``kind`` (only from ``device``'s connections, if given)."""
        conns = {h.conn for h in self.heard if isinstance(h.frame, w.Hello)
                 and (device is None or h.frame.device == device)}
        return [h for h in self.heard if isinstance(h.frame, kind) and h.conn in conns]

    @asynccontextmanager
    async def connect(self, url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
        assert url == URL
        self.connects.append(trio.current_time())
        await trio.lowlevel.checkpoint()
        if not self.accepting:
            raise OSError("connection refused")
        self._next += 1
        conn = self._next
        sock = self.sockets[conn] = FakeSocket(self, conn)
        self._apply(self.core.connection_opened(conn, "test", trio.current_time()))
        try:
            yield sock
        finally:
            sock.closed = True
            del self.sockets[conn]
            self._apply(self.core.connection_closed(conn, trio.current_time()))


@attrs.define
class Row:
    item: OutboxItem
    state: str = "queued"
    seq: int | None = None


class MemoryLinkStore:
    """An in-memory :class:`~crosstalk.actors.relay_link_store.LinkStore` with timed commits."""

    def __init__(
        self, *, commit_delay: float = 0.0, pinned: dict[str, bytes] | None = None,
        inbound_delays: Sequence[float] = (),
    ) -> None:
        self.commit_delay = commit_delay
        # Delays for the first inbound commits, in order (then commit_delay).
        self.inbound_delays = list(inbound_delays)
        self.pins = dict(pinned or {})
        self.cursors: dict[str, int] = {}
        self.outbox: dict[str, Row] = {}
        self.ids = 0  # the last outbox id given (ids are never reused, as AUTOINCREMENT's)
        self.inbound: dict[tuple[str, str], w.Op] = {}
        self.commits: list[tuple[float, str]] = []

    async def _commit(self, what: str) -> None:
        await trio.sleep(self.commit_delay)
        self.commits.append((trio.current_time(), what))

    async def load(self, url: str) -> LinkSnapshot:
        await trio.lowlevel.checkpoint()
        queued = [r.item for r in self.outbox.values() if r.state == "queued"]
        return LinkSnapshot(self.pins.get(url), dict(self.cursors), queued, self.ids)

    async def queue_post(self, room: str, op_id: str, body: bytes) -> OutboxItem | None:
        """What a room's send commits (crosstalk.actors.room_send); not the link's to call."""
        await self._commit(f"queue {op_id}")
        row = self.outbox.get(op_id)
        if row is None:
            self.ids += 1
            row = self.outbox[op_id] = Row(OutboxItem(self.ids, room, op_id, body))
        return row.item if row.state == "queued" else None

    async def commit_inbound(self, op: w.Op, received_at: float) -> bool:
        await self._commit(f"inbound {op.room} {op.seq}")
        new = (op.room, op.op_id) not in self.inbound
        self.inbound.setdefault((op.room, op.op_id), op)
        self.cursors[op.room] = max(op.seq, self.cursors.get(op.room, 0))
        return new

    async def commit_inbound_many(self, ops: Sequence[w.Op], received_at: float) -> None:
        if self.inbound_delays:
            await trio.sleep(self.inbound_delays.pop(0))
        await self._commit("inbound " + ", ".join(f"{op.room} {op.seq}" for op in ops))
        for op in ops:
            self.inbound.setdefault((op.room, op.op_id), op)
            self.cursors[op.room] = max(op.seq, self.cursors.get(op.room, 0))

    async def mark_sent(self, item: OutboxItem, seq: int, ts: float = 0.0) -> None:
        await self._commit(f"sent {item.op_id}")
        row = self.outbox[item.op_id]
        row.state, row.seq = "sent", seq

    async def drop_post(self, item: OutboxItem, error: CrosstalkError) -> None:
        await self._commit(f"drop {item.op_id}")
        del self.outbox[item.op_id]

    async def track_room(self, room: str) -> None:
        await self._commit(f"track {room}")
        self.cursors.setdefault(room, 0)

    async def forget_room(self, room: str) -> None:
        await self._commit(f"forget {room}")
        self.cursors.pop(room, None)

    async def pin_relay_key(self, url: str, key: bytes) -> None:
        await self._commit(f"pin {url}")
        self.pins[url] = key


@attrs.define
class Running:
    link: RelayLink
    inbox: trio.MemorySendChannel[LinkCommand]
    events: trio.MemoryReceiveChannel[LinkOutput]
    supervisor: Supervisor
    store: MemoryLinkStore | None = None


@asynccontextmanager
async def run_link(
    relay: FakeRelay,
    store: MemoryLinkStore,
    keys: crypto.Keys,
    *,
    device: str = "dev-a",
    fraction: float = 0.0,
    heartbeat: float = 5.0,
    ring: Callable[[str], bool] | None = None,
) -> AsyncIterator[Running]:
    """Run one link under a real supervisor for the duration of the block."""
    send_events, events = trio.open_memory_channel[LinkOutput](100)
    link = RelayLink(
        url=URL, keys=keys, device=device, store=store, events=send_events,
        timings=LinkTimings(), connect=relay.connect, fraction=lambda: fraction, ring=ring,
    )
    supervisor = Supervisor(heartbeat=heartbeat)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        inbox = await supervisor.start_actor("relay-link", link, channel=link.mailbox)
        yield Running(link, inbox, events, supervisor, store)
        nursery.cancel_scope.cancel()


E = TypeVar("E")


async def next_event(running: Running, kind: type[E], *, within: float = 60.0) -> E:
    """The next event of type ``kind`` (others are skipped), within ``within`` virtual seconds."""
    with trio.fail_after(within):
        while True:
            event = await running.events.receive()
            if isinstance(event, kind):
                return event
