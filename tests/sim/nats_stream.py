"""An in-memory JetStream stream for the simulation's relay nodes (``relay/node*.py``).

Not NATS's wire protocol: the stand-in sits at the seam :class:`relay.nats_store.NatsStorage`
offers (``backend=``), below the node code and above the Trio client. What it keeps of JetStream
is what the nodes rely on, and what the real-server tests (tests/relay/test_nats_*.py) exercise:

* one stream, every message under a sequence that only rises;
* ``Nats-Expected-Last-Subject-Sequence`` (with ``...-Subject``: checked against a wildcard):
  the publish is refused (error 10071) unless it names the subject's last live sequence (0: none);
* ``Nats-Msg-Id``: a second publish within the duplicate window stores nothing and answers the
  first one's sequence with ``duplicate`` (checked before the expected sequence, as the server
  does);
* ``Nats-Rollup: sub``: only the new message stays on its subject; ``Nats-TTL``: the message is
  gone that many seconds later (on the stream's clock: virtual time in the simulation);
* purge by subject filter, below a sequence or all; the last message of a subject; a scan of a
  filter in stream order; the stream's last sequence;
* RePublish ``N.s.>`` -> ``N.p.>`` with ``Nats-Sequence`` and the message's own headers, and core
  NATS publishes (presence): delivered to every open connection's matching subscriptions, each
  connection in order, behind its ``delay`` (the feed between nodes, late).

Every call is synchronous underneath; the async facade hops once through the scheduler before
and once after (a round trip the node may be cancelled in, and its echo may overtake its reply).
No threads, no wall clock: deterministic under the simulation's scheduler.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import trio

from relay import nats_wire as wire
from relay.nats_layout import Layout, Outgoing
from relay.nats_store import (
    DUPLICATE_WINDOW,
    WRONG_LAST_SEQUENCE,
    JetStream,
    JetStreamError,
    StreamMessage,
)

T = TypeVar("T")
EXPECTED = "Nats-Expected-Last-Subject-Sequence"


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more at the end."""
    want, have = pattern.split("."), subject.split(".")
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have) or (token != "*" and token != have[i]):
            return False
    return len(want) == len(have)


class SimStream:
    """The stream: messages by sequence, the subjects' live sequences, the open connections."""

    def __init__(self, layout: Layout, clock: Callable[[], float]) -> None:
        self.layout = layout
        self._clock = clock
        self._messages: dict[int, StreamMessage] = {}
        self._subjects: dict[str, list[int]] = {}  # subject -> live seqs, rising
        self._expiring: list[tuple[float, int]] = []  # (when, seq) of messages with a TTL
        self._ids: dict[str, tuple[int, float]] = {}  # Nats-Msg-Id -> (seq, stored at)
        self.last_seq = 0
        self.connections: list[SimConnection] = []
        # Called with each message stored, in stream order (the simulation's ground truth).
        self.on_stored: Callable[[StreamMessage], None] = lambda _: None

    # --- JetStream ------------------------------------------------------------------------------

    def publish(self, subject: str, payload: bytes, headers: dict[str, str]) -> tuple[int, bool]:
        """Store a message; (its sequence, whether it was a duplicate). Raises JetStreamError."""
        now = self._expire()
        msg_id = headers.get("Nats-Msg-Id")
        if msg_id is not None:
            seen = self._ids.get(msg_id)
            if seen is not None and now - seen[1] < DUPLICATE_WINDOW:
                return seen[0], True
        if EXPECTED in headers:
            last = self.last_on(headers.get(f"{EXPECTED}-Subject", subject))
            if last != int(headers[EXPECTED]):
                raise JetStreamError(WRONG_LAST_SEQUENCE, f"wrong last sequence: {last}")
        if headers.get("Nats-Rollup") == "sub":
            self._remove(list(self._subjects.get(subject, ())))
        self.last_seq += 1
        seq = self.last_seq
        message = StreamMessage(seq, subject, dict(headers), payload)
        self._messages[seq] = message
        self._subjects.setdefault(subject, []).append(seq)
        if "Nats-TTL" in headers:
            heapq.heappush(self._expiring, (now + float(headers["Nats-TTL"]), seq))
        if msg_id is not None:
            self._ids[msg_id] = (seq, now)
        self.on_stored(message)
        self._republish(message)
        return seq, False

    def purge(self, subject: str, seq: int | None = None) -> None:
        """Remove the messages on ``subject`` (a filter), only those below ``seq`` if given."""
        self._expire()
        doomed = [s for subj, seqs in self._subjects.items() if subject_matches(subject, subj)
                  for s in seqs if not seq or s < seq]
        self._remove(doomed)

    def get_last(self, subject: str) -> StreamMessage | None:
        self._expire()
        seqs = self._subjects.get(subject)
        return self._messages[seqs[-1]] if seqs else None

    def scan(self, subject: str) -> list[StreamMessage]:
        """Every live message on ``subject`` (a filter), in stream order."""
        self._expire()
        seqs = sorted(s for subj, ss in self._subjects.items() if subject_matches(subject, subj)
                      for s in ss)
        return [self._messages[s] for s in seqs]

    def last_on(self, subject: str) -> int:
        """The last live sequence on ``subject`` (a filter); 0 if none."""
        self._expire()
        if "*" not in subject and ">" not in subject:
            seqs = self._subjects.get(subject)
            return seqs[-1] if seqs else 0
        return max((ss[-1] for subj, ss in self._subjects.items()
                    if ss and subject_matches(subject, subj)), default=0)

    def __len__(self) -> int:
        return len(self._messages)

    def _remove(self, seqs: list[int]) -> None:
        for seq in seqs:
            message = self._messages.pop(seq, None)
            if message is None:
                continue
            live = self._subjects[message.subject]
            live.remove(seq)
            if not live:
                del self._subjects[message.subject]

    def _expire(self) -> float:
        now = self._clock()
        gone = []
        while self._expiring and self._expiring[0][0] <= now:
            gone.append(heapq.heappop(self._expiring)[1])
        self._remove(gone)
        return now

    # --- delivery -------------------------------------------------------------------------------

    def _republish(self, message: StreamMessage) -> None:
        lay = self.layout
        prefix = f"{lay.root}."
        if not message.subject.startswith(prefix):
            return
        headers = {**message.headers, "Nats-Stream": lay.stream, "Nats-Subject": message.subject,
                   "Nats-Sequence": str(message.seq)}
        subject = f"{lay.republished}.{message.subject[len(prefix):]}"
        self.broadcast(subject, message.data, wire.encode_headers(headers))

    def broadcast(self, subject: str, payload: bytes, headers: bytes | None = None) -> None:
        """Core NATS: ``subject`` reaches the subscriptions open now, on every connection."""
        for conn in self.connections:
            conn.route(subject, payload, headers)


class SimConnection:
    """A node's NATS connection: its subscriptions, and deliveries in order behind ``delay``."""

    def __init__(self, stream: SimStream, name: str) -> None:
        self.stream = stream
        self.name = name
        self.delay = 0.0  # seconds each delivery waits (the feed between nodes, late)
        self._subs: dict[str, tuple[str, Callable[[wire.Msg], None]]] = {}
        self._next_sid = 0
        self._queue: collections.deque[tuple[float, wire.Msg]] = collections.deque()
        self._wake = trio.Event()
        self.open = False

    def subscribe(self, subject: str, callback: Callable[[wire.Msg], None]) -> str:
        self._next_sid += 1
        sid = str(self._next_sid)
        self._subs[sid] = (subject, callback)
        return sid

    def unsubscribe(self, sid: str) -> None:
        self._subs.pop(sid, None)

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None,
                      reply: str | None = None) -> None:
        del reply  # no requests here: JetStream calls go through SimJetStream
        await trio.lowlevel.checkpoint()
        self.stream.broadcast(subject, payload, wire.encode_headers(headers) if headers else None)

    def route(self, subject: str, payload: bytes, headers: bytes | None) -> None:
        """The server hands this connection a message for each matching subscription."""
        if not self.open:
            return
        due = trio.current_time() + self.delay
        if self._queue:
            due = max(due, self._queue[-1][0])  # FIFO, as one TCP connection is
        for sid, (pattern, _) in self._subs.items():
            if subject_matches(pattern, subject):
                self._queue.append((due, wire.Msg(subject, sid, None, payload, headers)))
                self._wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connected until cancelled (a crashed node): deliver what arrives, in order."""
        self.open = True
        self.stream.connections.append(self)
        try:
            task_status.started()
            while True:
                if not self._queue:
                    self._wake = trio.Event()
                    await self._wake.wait()
                    continue
                due, msg = self._queue[0]
                if due > trio.current_time():
                    await trio.sleep_until(due)
                    continue
                self._queue.popleft()
                sub = self._subs.get(msg.sid)
                if sub is not None:  # unsubscribed meanwhile: the client drops it
                    sub[1](msg)
                await trio.lowlevel.checkpoint()
        finally:
            self.open = False
            self._queue.clear()
            self.stream.connections.remove(self)


class SimJetStream:
    """The JetStream calls of :class:`relay.nats_store.JetStream` on the stand-in: a hop through
    the scheduler before and after each (none with ``hop`` False: the synchronous path).
    ``after_publish`` runs between a publish stored and its answer (where a node may die)."""

    def __init__(self, stream: SimStream, *, hop: bool = True,
                 after_publish: Callable[[], Awaitable[None]] | None = None) -> None:
        self.stream = stream
        self._hop = hop
        self._after_publish = after_publish

    async def _round_trip(self) -> None:
        if self._hop:
            await trio.lowlevel.checkpoint()

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]:
        if out.ttl is not None:
            headers["Nats-TTL"] = str(int(out.ttl))
        await self._round_trip()
        answer = self.stream.publish(out.subject, out.payload, headers)
        if self._after_publish is not None:
            await self._after_publish()
        await self._round_trip()
        return answer

    async def purge(self, subject: str, seq: int | None = None) -> None:
        await self._round_trip()
        self.stream.purge(subject, seq)
        await self._round_trip()

    async def add_stream(self, config: dict[str, Any]) -> None:
        del config  # the stream exists from the start

    async def get_last(self, subject: str) -> StreamMessage | None:
        await self._round_trip()
        return self.stream.get_last(subject)

    async def scan(self, subject: str) -> list[StreamMessage]:
        await self._round_trip()
        return self.stream.scan(subject)

    async def last_sequence(self) -> int:
        await self._round_trip()
        return self.stream.last_seq


class SimBackend:
    """One node's way into the stand-in (``NatsStorage(backend=...)``)."""

    def __init__(self, stream: SimStream, name: str) -> None:
        self.stream = stream
        self.name = name
        self.conn: SimConnection | None = None

    def connection(self, on_reconnect: Callable[[], None]) -> tuple[SimConnection, JetStream]:
        del on_reconnect  # the stand-in's connection never drops while its node lives
        self.conn = SimConnection(self.stream, self.name)
        return self.conn, SimJetStream(self.stream)

    def call(self, work: Callable[[JetStream], Awaitable[T]]) -> T:
        """Run ``work`` at once: with no hops its awaits never suspend."""
        return run_now(work(SimJetStream(self.stream, hop=False)))


def run_now(aw: Awaitable[T]) -> T:
    """Drive an awaitable that never suspends to its result."""
    coro: Coroutine[Any, Any, T] = aw  # type: ignore[assignment]  # every caller passes one
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]  # StopIteration.value is Any
    coro.close()
    raise RuntimeError("the stand-in's synchronous path suspended")
