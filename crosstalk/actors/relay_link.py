"""The relay link actor: the daemon's one WebSocket to its relay, kept alive and honest.

Shape: one :class:`~crosstalk.core.link.LinkMachine` (every rule) and four tasks per instance:

* *connections*: connect (trio-websocket, ``connect_timeout`` and ``disconnect_timeout`` always
  set), then per connection a reader (frames -> machine, beats per frame), a processor (carries
  out what the machine decided), a writer (the only task that sends; drains ``data_to_send``), a
  pinger (``ws.ping()`` under ``fail_after``, beats per pong) and a handshake deadline; on any
  failure, back off (jittered, cap 30 s) and reconnect.
* *commands*: the inbox (``Post`` is committed to the outbox before the caller hears ``Queued``;
  ``Request`` is answered on its own reply channel).
* *timer*: wakes at the machine's next deadline (request timeouts, paused rooms).
* *vouch*: beats, every half heartbeat, only while a wait that has its own bound is running
  (connect, close, backoff). If such a wait overran its bound the beats would stop and the
  supervisor's watchdog would restart us; a frozen connection is caught by the ping timeout.

The inbox is read with ``ctx.inbox.receive()``, never ``ctx.receive()``: idling there would vouch
for the whole instance (see :mod:`crosstalk.actors.context`).

Durability (DESIGN.md §4): an inbound op and its cursor are committed in one transaction
(``relay_inbound`` + ``relay_cursors``), handed to the consumer, and only then acknowledged; an
outbox row becomes ``sent`` (with its seq) only on ``posted``. The ``events`` channel is the fast
path; after a crash a consumer finds anything it missed in ``relay_inbound``.

Group commit: the reader does not wait for commits. It feeds each frame to the machine and wakes
the processor; frames that arrive while the processor is committing pile up in the machine, and
the processor's next round commits all the ops among them in one transaction (one fsync for a
burst, a resume or a busy room, instead of one per op). The reader stops reading once
``MAX_UNTAKEN_FRAMES`` frames wait for the processor, so a flood cannot pile up in memory.

Logging: INFO for connect, ready, lost and pinning; WARNING for a refused relay key and for relay
complaints; DEBUG for each state transition.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed, HandshakeError, open_websocket_url

from crosstalk import crypto
from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_link_store import LinkStore, SqliteLinkStore
from crosstalk.core import link as core
from crosstalk.core.link import LinkMachine, LinkState, RequestFrame
from crosstalk.errors import CrosstalkError, RelayKeyMismatch, RemoteProtocolError
from crosstalk.store.db import Store
from crosstalk.wire import relay as w
from crosstalk.wire.relay import MAX_FRAME

log = logging.getLogger(__name__)

MAX_UNTAKEN_FRAMES = 256
"""Frames the reader may feed the machine before the processor takes their events."""


@attrs.frozen
class LinkTimings:
    """Durations in float seconds. Keep ``ping_interval + ping_timeout`` under the heartbeat."""

    connect_timeout: float = 10.0
    disconnect_timeout: float = 2.0
    ping_interval: float = 2.0
    ping_timeout: float = 2.0
    send_timeout: float = 10.0
    request_timeout: float = 20.0


# --- inbox commands ----------------------------------------------------------------------------


@attrs.frozen
class Queued:
    """A post's op is committed to the outbox (delivery state ``queued``)."""

    op_id: str


@attrs.frozen(eq=False)
class Post:
    """Send a sealed op to ``room``; ``reply`` (buffer >= 1) hears ``Queued`` or an error."""

    room: str
    op_id: str
    body: bytes
    reply: trio.MemorySendChannel[Queued | CrosstalkError] | None = None


@attrs.frozen(eq=False)
class Request:
    """A request frame (its ``req`` is replaced); ``reply`` (buffer >= 1) hears the answer.

    The answer is the relay's reply frame, or a CrosstalkError: the relay's refusal (same code),
    or ``RelayUnreachable`` when the link is not READY within ``timeout`` (default
    ``LinkTimings.request_timeout``) or the relay does not answer by then.
    """

    frame: RequestFrame
    reply: trio.MemorySendChannel[w.RelayFrame | CrosstalkError]
    timeout: float | None = None


@attrs.frozen
class RetryNow:
    """Skip what is left of the backoff: the relay is known to be back (we just restarted it)."""


LinkCommand = Post | Request | RetryNow


# --- events for the rest of the daemon -----------------------------------------------------------


@attrs.frozen
class InboundOp:
    """An op committed here (and acknowledged right after this event was taken)."""

    room: str
    seq: int
    sender_fingerprint: str
    op_id: str
    body: bytes
    relay_ts: float


@attrs.frozen
class OpSent:
    """Our op was sequenced by the relay (delivery state ``sent``)."""

    room: str
    op_id: str
    seq: int


@attrs.frozen(eq=False)
class OpRefused:
    """The relay will never take this op (``too_large``, ``not_a_member`` …); it left the outbox."""

    room: str
    op_id: str
    error: CrosstalkError


@attrs.frozen
class RelayPush:
    """roster, invited, room_gone, presence, slot_joined, slot_msg or slot_closed."""

    frame: w.RelayFrame


@attrs.frozen
class LinkUp:
    url: str
    relay_key: bytes
    rooms: list[w.ResumedRoom]
    missing: list[str]


@attrs.frozen
class LinkDown:
    url: str
    reason: str


LinkOutput = InboundOp | OpSent | OpRefused | RelayPush | LinkUp | LinkDown


@attrs.frozen
class LinkStatus:
    """For ``crosstalk status`` and ``doctor``."""

    url: str
    state: str
    connected: bool
    last_error: str | None
    relay_key: str | None
    queued: int
    attempts: int
    losses: int = 0  # connections lost since the daemon started
    lost_ago_s: float | None = None  # how long ago the last one was lost
    last_loss: str | None = None  # why it was lost
    reconnect_s: float | None = None  # how long the last loss took to heal (None: not yet)


@attrs.define
class LinkHistory:
    """Losses and recoveries of the link, for ``doctor`` (trio time, seconds)."""

    losses: int = 0
    lost_at: float | None = None
    reason: str | None = None
    reconnect_s: float | None = None

    def lost(self, now: float, reason: str) -> None:
        if self.lost_at is None or self.reconnect_s is not None:  # a new outage begins
            self.lost_at, self.reconnect_s = now, None
        self.losses += 1
        self.reason = reason

    def ready(self, now: float) -> None:
        if self.lost_at is not None and self.reconnect_s is None:
            self.reconnect_s = now - self.lost_at


# --- the socket seam -----------------------------------------------------------------------------


class RelaySocket(Protocol):
    """What the link needs of a WebSocket (trio-websocket's connection, or a test fake)."""

    async def get_message(self) -> str | bytes: ...

    async def send_message(self, message: str) -> None: ...

    async def ping(self) -> None: ...


Connector = Callable[[str, LinkTimings], AbstractAsyncContextManager[RelaySocket]]


@asynccontextmanager
async def open_relay_socket(url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
    """The real connector: ``url + "/ws"``, with both timeouts set (platform-notes §3)."""
    opened = None
    try:
        async with open_websocket_url(
            url.rstrip("/") + "/ws",
            connect_timeout=timings.connect_timeout,
            disconnect_timeout=timings.disconnect_timeout,
            max_message_size=MAX_FRAME + 4096,
        ) as ws:
            opened = ws
            yield ws
    finally:
        # trio-websocket 0.12 leaks the TCP stream when the peer vanishes: its reader marks the
        # connection aborted (close code 1006) without closing the stream, and aclose() then
        # returns early because a close reason is already set. Close it ourselves (idempotent).
        stream = getattr(opened, "_stream", None)
        if isinstance(stream, trio.abc.AsyncResource):
            await trio.aclose_forcefully(stream)


# What ends one connection (and is retried). Anything else (a store error, a closed events
# channel, a bug) crashes the actor, and the supervisor restarts it. trio-websocket turns a broken
# stream into ConnectionClosed, so trio's own Broken/ClosedResourceError are not listed here.
LINK_ERRORS = (
    HandshakeError, ConnectionClosed, OSError, trio.TooSlowError, RemoteProtocolError,
    RelayKeyMismatch,
)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CrosstalkError):
        return exc.message
    if isinstance(exc, ConnectionClosed):
        return "the relay closed the connection"
    if isinstance(exc, HandshakeError) and exc.__cause__ is not None:
        return f"cannot connect ({exc.__cause__})"
    return f"{type(exc).__name__}: {exc}".rstrip(": ") or type(exc).__name__


def _answer(
    reply: trio.MemorySendChannel[w.RelayFrame | CrosstalkError]
    | trio.MemorySendChannel[Queued | CrosstalkError]
    | None,
    value: object,
) -> None:
    """Hand a one-shot answer over without waiting; a caller that left is not our problem."""
    if reply is None:
        return
    try:
        reply.send_nowait(value)  # type: ignore[arg-type]  # value matches the channel's kind
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the caller gave up and closed its end
    except trio.WouldBlock:
        log.warning("relay link: a reply channel had no room for its answer; use buffer >= 1")


class RelayLink:
    """The relay-link actor (run it under the :class:`~crosstalk.actors.supervisor.Supervisor`).

    Args:
        url: the relay, ``ws://host:port`` or ``wss://…`` (``/ws`` is appended).
        keys: this identity's keys.
        device: this home's device id (see :func:`~crosstalk.actors.relay_link_store.device_id`).
        store: the daemon's :class:`Store` (or any :class:`LinkStore`, for tests).
        events: where committed inbound ops, post outcomes, pushes and up/down go, in order.
        timings: timeouts and intervals.
        connect: how to open a socket (tests pass an in-memory fake).
        fraction: draws the backoff jitter in [0, 1].
    """

    def __init__(
        self,
        *,
        url: str,
        keys: crypto.Keys,
        device: str,
        store: Store | LinkStore,
        events: trio.MemorySendChannel[LinkOutput],
        timings: LinkTimings | None = None,
        connect: Connector = open_relay_socket,
        fraction: Callable[[], float] = random.random,
    ) -> None:
        self._url = url
        self._keys = keys
        self._device = device
        self._store: LinkStore = SqliteLinkStore(store) if isinstance(store, Store) else store
        self._events = events
        self._t = timings or LinkTimings()
        self._connect = connect
        self._fraction = fraction
        self._machine: LinkMachine | None = None
        self.history = LinkHistory()
        self._bounded_until = -1.0
        self._send_wake = trio.Event()
        self._timer_kick = trio.Event()
        self._ready = trio.Event()
        self._retry_now = trio.Event()  # set by RetryNow: cut the current backoff short
        self._fed = 0  # frames fed to the machine since the processor last took its events
        self._input = trio.Event()  # set by the reader: the machine has new events
        self._taken = trio.Event()  # set by the processor each time it takes them
        # One task at a time carries out the machine's events (see _after_input).
        self._carrying_out = trio.Lock()

    def statistics(self) -> LinkStatus:
        """Where the link stands (connected, last error, outbox depth)."""
        m = self._machine
        state = m.state if m is not None else LinkState.DISCONNECTED
        key = m.relay_key if m is not None else None
        return LinkStatus(
            url=self._url,
            state=state.value,
            connected=state is LinkState.READY,
            last_error=m.last_error if m is not None else None,
            relay_key=key.hex() if key is not None else None,
            queued=m.queued if m is not None else 0,
            attempts=m.attempts if m is not None else 0,
            losses=self.history.losses,
            lost_ago_s=(
                None if self.history.lost_at is None
                else round(trio.current_time() - self.history.lost_at, 3)
            ),
            last_loss=self.history.reason,
            reconnect_s=(
                None if self.history.reconnect_s is None else round(self.history.reconnect_s, 3)
            ),
        )

    async def run(
        self,
        ctx: ActorContext[LinkCommand],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until every sender has closed the inbox (or we are cancelled)."""
        snapshot = await self._store.load(self._url)
        self._machine = LinkMachine(
            keys=self._keys, device=self._device, url=self._url,
            pinned_key=snapshot.pinned_key, cursors=snapshot.cursors, outbox=snapshot.outbox,
        )
        t = self._t
        if t.ping_interval + t.ping_timeout >= ctx.heartbeat:
            log.warning(
                "relay link: ping interval + timeout (%g s) is not under the heartbeat (%g s)",
                t.ping_interval + t.ping_timeout, ctx.heartbeat,
            )
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._timer)
                nursery.start_soon(self._vouch, ctx)
                nursery.start_soon(self._connections, ctx)
                task_status.started()
                await self._commands(ctx)
                nursery.cancel_scope.cancel()
        finally:
            # Callers wait on their reply channels: answer them before this instance is gone.
            self._m.abandon_requests("the actor stopped or is restarting")
            for event in self._m.events_received():
                if isinstance(event, core.RequestFailed):
                    _answer(event.token, event.error)  # type: ignore[arg-type]  # reply channel

    @property
    def _m(self) -> LinkMachine:
        assert self._machine is not None, "the machine exists once run() has loaded the store"
        return self._machine

    # --- connections --------------------------------------------------------------------------

    async def _connections(self, ctx: ActorContext[LinkCommand]) -> None:
        while True:
            self._transition("connecting", self._m.connecting)
            reason = await self._one_connection(ctx)
            self._transition("lost", functools.partial(self._m.connection_lost, reason))
            self.history.lost(trio.current_time(), reason)
            await self._after_input()
            delay = self._m.retry_delay(self._fraction())
            log.info("relay link: %s lost (%s); retrying in %.2f s", self._url, reason, delay)
            self._bound(ctx, delay)
            with trio.move_on_after(delay):
                await self._retry_now.wait()
            self._retry_now = trio.Event()

    async def _one_connection(self, ctx: ActorContext[LinkCommand]) -> str:
        """Connect, serve one connection until it fails, close it; return why it ended."""
        t = self._t
        self._ready = trio.Event()
        self._bound(ctx, t.connect_timeout)
        ended: list[str] = []  # why, first reason first (closing may fail too, afterwards)
        try:
            async with self._connect(self._url, t) as ws:
                ctx.beat()
                self._transition("connected", self._m.connected)
                async with trio.open_nursery() as nursery:
                    scope = nursery.cancel_scope
                    tasks = (
                        self._reader, self._processor, self._writer, self._pinger,
                        self._handshake_limit,
                    )
                    for task in tasks:
                        nursery.start_soon(self._guard, task, ws, ctx, scope, ended)
                self._bound(ctx, t.disconnect_timeout)
        except RelayKeyMismatch as exc:
            log.warning("relay link: %s", exc.message)
            ended.append(exc.message)
        except LINK_ERRORS as exc:
            ended.append(_describe(exc))
        ctx.beat()
        return ended[0] if ended else "the connection ended"

    async def _guard(
        self,
        task: Callable[[RelaySocket, ActorContext[LinkCommand]], Awaitable[None]],
        ws: RelaySocket,
        ctx: ActorContext[LinkCommand],
        scope: trio.CancelScope,
        ended: list[str],
    ) -> None:
        """Run one connection task; its end (or failure) ends the whole connection."""
        try:
            await task(ws, ctx)
        except RelayKeyMismatch as exc:
            log.warning("relay link: %s", exc.message)
            ended.append(exc.message)
        except LINK_ERRORS as exc:
            ended.append(_describe(exc))
        scope.cancel()

    async def _reader(self, ws: RelaySocket, ctx: ActorContext[LinkCommand]) -> None:
        self._fed = 0
        while True:
            text = await ws.get_message()
            ctx.beat()
            before = self._m.state
            self._m.frame_received(text, trio.current_time())
            if self._m.state is not before:
                self._trace(before, "frame")
            self._fed += 1
            self._input.set()
            while self._fed >= MAX_UNTAKEN_FRAMES:
                await self._taken.wait()

    async def _processor(self, ws: RelaySocket, ctx: ActorContext[LinkCommand]) -> None:
        """Carry out, round by round, whatever the frames fed since the last round decided."""
        while True:
            await self._input.wait()
            self._input = trio.Event()
            self._fed = 0
            self._taken.set()
            self._taken = trio.Event()
            await self._after_input()  # takes the machine's events before its first await

    async def _writer(self, ws: RelaySocket, ctx: ActorContext[LinkCommand]) -> None:
        while True:
            await self._send_wake.wait()
            self._send_wake = trio.Event()
            for text in self._m.data_to_send():
                with trio.fail_after(self._t.send_timeout):
                    await ws.send_message(text)

    async def _pinger(self, ws: RelaySocket, ctx: ActorContext[LinkCommand]) -> None:
        while True:
            await trio.sleep(self._t.ping_interval)
            try:
                with trio.fail_after(self._t.ping_timeout):
                    await ws.ping()
            except trio.TooSlowError:
                raise trio.TooSlowError(
                    f"no pong from the relay within {self._t.ping_timeout:g} s"
                ) from None
            ctx.beat()

    async def _handshake_limit(self, ws: RelaySocket, ctx: ActorContext[LinkCommand]) -> None:
        with trio.move_on_after(self._t.connect_timeout):
            await self._ready.wait()
        if not self._ready.is_set():
            raise trio.TooSlowError(
                f"the relay did not finish the handshake within {self._t.connect_timeout:g} s"
            )
        await trio.sleep_forever()

    def _bound(self, ctx: ActorContext[LinkCommand], seconds: float) -> None:
        """A wait bounded by ``seconds`` starts now: beat, and let ``_vouch`` beat through it."""
        ctx.beat()
        self._bounded_until = trio.current_time() + seconds

    async def _vouch(self, ctx: ActorContext[LinkCommand]) -> None:
        while True:
            await trio.sleep(ctx.heartbeat / 2)
            if trio.current_time() <= self._bounded_until:
                ctx.beat()

    # --- inbox and timer ----------------------------------------------------------------------

    async def _commands(self, ctx: ActorContext[LinkCommand]) -> None:
        while True:
            try:
                command = await ctx.inbox.receive()
            except trio.EndOfChannel:
                return
            if isinstance(command, Post):
                await self._post(command)
            elif isinstance(command, RetryNow):
                self._retry_now.set()
            else:
                timeout = command.timeout
                self._m.request(
                    command.frame, command.reply, now=trio.current_time(),
                    timeout=self._t.request_timeout if timeout is None else timeout,
                )
            await self._after_input()

    async def _post(self, command: Post) -> None:
        try:
            item = await self._store.queue_post(
                command.room, command.op_id, command.body, time.time()
            )
        except CrosstalkError as exc:
            _answer(command.reply, exc)
            return
        _answer(command.reply, Queued(command.op_id))
        if item is not None:
            self._m.post_queued(item, trio.current_time())

    async def _timer(self) -> None:
        while True:
            self._timer_kick = kick = trio.Event()
            with trio.move_on_at(self._m.next_deadline()):
                await kick.wait()
            if trio.current_time() >= self._m.next_deadline():
                self._m.tick(trio.current_time())
                await self._after_input()

    # --- machine output -----------------------------------------------------------------------

    async def _after_input(self) -> None:
        """Carry out what the machine decided: its events, in order, then wake the writer.

        A run of consecutive arrivals is committed in one transaction, then each is handed on
        and acknowledged, in order; the order relative to other events is kept.

        The processor, the commands task, the timer and the connection loop all call this, and
        the reader keeps feeding frames while they wait on the store. So the events are taken
        and carried out under one (fair) lock: without it a second caller could take later ops
        and commit them while the first still commits earlier ones, and the room actor, which
        applies whatever follows its cursor, would step over the earlier ops for good.
        """
        async with self._carrying_out:
            events = self._m.events_received()
            done = 0  # events[:done] are carried out
            try:
                while done < len(events):
                    arrived: list[w.Op] = []  # the run of arrivals from here: one commit
                    for event in events[done:]:
                        if not isinstance(event, core.OpArrived):
                            break
                        arrived.append(event.op)
                    if arrived:
                        await self._arrived(arrived)
                        done += len(arrived)
                    else:
                        await self._handle(events[done])
                        done += 1
            except BaseException:
                # Cancelled (the connection ended under us) or failed part-way: the rest goes
                # back to the machine, first in line, for the next caller. Dropping taken ops
                # here would let later ones be committed first and the earlier ones be skipped.
                # A key seen in a handshake belongs to that connection (the next handshake
                # shows it again), and pinning it out of turn would fault the machine.
                self._m.events_returned(
                    [e for e in events[done:] if not isinstance(e, core.RelayKeySeen)]
                )
                raise
        self._send_wake.set()
        self._timer_kick.set()

    async def _arrived(self, ops: list[w.Op]) -> None:
        """Commit inbound ops with their cursors, then hand each on and acknowledge it."""
        await self._store.commit_inbound_many(ops, time.time())
        for op in ops:
            await self._events.send(
                InboundOp(op.room, op.seq, op.sender, op.op_id, op.body, op.ts)
            )
            self._m.op_committed(op.room, op.seq)

    async def _handle(self, event: core.LinkEvent) -> None:
        store, url = self._store, self._url
        if isinstance(event, core.OpArrived):
            await self._arrived([event.op])
        elif isinstance(event, core.PostAccepted):
            if await store.mark_sent(event.item, event.seq):
                self._m.op_committed(event.item.room, event.seq)  # acknowledge our own post
            await self._events.send(OpSent(event.item.room, event.item.op_id, event.seq))
        elif isinstance(event, core.PostRejected):
            await store.drop_post(event.item, event.error)
            await self._events.send(OpRefused(event.item.room, event.item.op_id, event.error))
        elif isinstance(event, core.RoomJoined):
            await store.track_room(event.room)
        elif isinstance(event, core.RoomLeft):
            await store.forget_room(event.room)
        elif isinstance(event, core.RelayKeySeen):
            await store.pin_relay_key(url, event.relay_key)
            log.info("relay link: pinned key %s for %s", event.relay_key.hex()[:16], url)
            self._m.relay_key_pinned(trio.current_time())
        elif isinstance(event, core.ReplyArrived | core.RequestFailed):
            value = event.frame if isinstance(event, core.ReplyArrived) else event.error
            _answer(event.token, value)  # type: ignore[arg-type]  # tokens are reply channels
        elif isinstance(event, core.PushArrived):
            await self._events.send(RelayPush(event.frame))
        elif isinstance(event, core.LinkReady):
            self._ready.set()
            self.history.ready(trio.current_time())
            self._bounded_until = -1.0  # from now on, frames and pongs prove we are alive
            log.info("relay link: ready on %s", url)
            await self._events.send(LinkUp(url, event.relay_key, event.rooms, event.missing))
        elif isinstance(event, core.LinkLost):
            await self._events.send(LinkDown(url, event.reason))
        else:
            log.warning("relay link: the relay complained: %s (%s)", event.message, event.code)

    def _transition(self, what: str, step: Callable[[float], None]) -> None:
        before = self._m.state
        step(trio.current_time())
        self._trace(before, what)

    def _trace(self, before: LinkState, what: str) -> None:
        log.debug("relay link[%s].%s -> [%s]", before.name, what, self._m.state.name)
