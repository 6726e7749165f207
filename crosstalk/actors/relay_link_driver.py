"""The relay link's driver: the one task that calls the boss, and what it carries out.

Everything that happens to the link reaches the driver through one bounded channel of
:data:`DriverInput`, the actor's inbox: requests, ``RetryNow`` and posts committed to the outbox
(from the rest of the daemon), and frames the reader got and connections opened and closed (the
dialer; what an earlier instance's dialer left there is dropped). The driver loops:

1. carry out what the boss decided, in order: commits (a run of inbound ops is one transaction:
   the group commit), answers to callers, events for the rest of the daemon, the dial and drop
   orders; after each step, the boss's frames go to the open connection's writer;
2. wait for the first input, or the boss's next deadline, then take every input already queued
   (the whole batch, so what piled up during a commit is committed together next round);
3. feed the batch to the boss, then ``tick``.

The boss is only ever called from here, so it needs no lock, and nothing it handed out ever has
to be put back: if the driver is cancelled, the actor instance (boss and all) is gone with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

import attrs
import trio

from crosstalk import sim_hooks
from crosstalk.actors.relay_link_api import (
    Committed,
    InboundOp,
    LinkDown,
    LinkHistory,
    LinkOutput,
    LinkUp,
    OpRefused,
    OpSent,
    RelayPush,
    Request,
    RetryNow,
)
from crosstalk.actors.relay_link_store import LinkStore
from crosstalk.actors.relay_socket import Close, Closed, FrameIn, Opened, SocketInput, Vouch
from crosstalk.core.link import LinkBoss, LinkState, OutboxItem, Resealed
from crosstalk.core.link import events as ev
from crosstalk.errors import CrosstalkError
from crosstalk.logs import repeats_from_env
from crosstalk.wire import relay as w

log = logging.getLogger("crosstalk.actors.relay_link")

INPUT_BUFFER = 256
"""Inputs that may wait for the driver; a full channel holds the reader (and callers) back."""


DriverInput = SocketInput | Request | RetryNow | Committed
SocketInputs = (Opened, FrameIn, Closed)


@attrs.frozen
class Seen:
    """What the driver last published of the boss, for ``statistics`` (read from any task)."""

    state: LinkState = LinkState.DISCONNECTED
    last_error: str | None = None
    relay_key: bytes | None = None
    queued: int = 0
    attempts: int = 0


def answer(reply: trio.MemorySendChannel[w.RelayFrame | CrosstalkError], value: object) -> None:
    """Hand a one-shot answer over without waiting; a caller that left is not our problem."""
    try:
        reply.send_nowait(value)  # type: ignore[arg-type]  # value matches the channel's kind
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass  # the caller gave up and closed its end
    except trio.WouldBlock:
        log.warning("relay link: a reply channel had no room for its answer; use buffer >= 1")


class LinkDriver:
    """The one task that calls the boss (see the module docstring)."""

    def __init__(
        self,
        *,
        boss: LinkBoss,
        url: str,
        store: LinkStore,
        events: trio.MemorySendChannel[LinkOutput],
        request_timeout: float,
        fraction: Callable[[], float],
        vouch: Vouch,
        dials: trio.MemorySendChannel[None],
        history: LinkHistory,
        reseal: Callable[[OutboxItem], Awaitable[Resealed]] | None = None,
        posted: Callable[[float, float], None] | None = None,
        source: object = None,
        ring: Callable[[str], bool] | None = None,
    ) -> None:
        self._boss = boss
        self._ring = ring
        # This instance's dialer: socket inputs from another (an instance before a restart left
        # them in the inbox) are about a connection that is gone, and are dropped.
        self._source = source
        # Send -> posted: when each item this instance queued was committed to the outbox, until
        # the relay's answer; ``posted(seconds, now)`` is told each. Items that leave the outbox
        # leave this too, so it holds at most the outbox.
        self._posted = posted
        self._queued_at: dict[int, float] = {}
        self._reseal = reseal
        self._url = url
        self._store = store
        self._events = events
        self._request_timeout = request_timeout
        self._fraction = fraction
        self._vouch = vouch
        self._dials = dials
        self._history = history
        self.seen = Seen()
        # A relay that stays down fails every redial the same way: say each reason once, then
        # summarise, until the link is ready again.
        self._losses = repeats_from_env()
        self._frames: trio.MemorySendChannel[str | Close] | None = None  # the open connection's

    async def run(self, taken: trio.MemoryReceiveChannel[DriverInput]) -> None:
        self._boss.start(trio.current_time())
        try:
            while True:
                await self._carry_out()
                self._publish()
                batch = await self._next_batch(taken)
                now = trio.current_time()
                for item in batch:
                    if not isinstance(item, SocketInputs) or item.source is self._source:
                        self._feed(item, now)
                self._step("tick", partial(self._boss.tick, now))
                self._publish()
        finally:
            # Callers wait on their reply channels: answer them before this instance is gone.
            self._boss.abandon_requests("the actor stopped or is restarting")
            for event in self._boss.events_received():
                if isinstance(event, ev.RequestFailed):
                    answer(event.token, event.error)  # type: ignore[arg-type]  # reply channel

    async def _next_batch(self, taken: trio.MemoryReceiveChannel[DriverInput]) -> list[DriverInput]:
        """Everything queued for the driver, waiting for the first until the boss's deadline."""
        batch: list[DriverInput] = []
        with trio.move_on_at(self._boss.next_deadline()):
            batch.append(await taken.receive())
        while batch and len(batch) < INPUT_BUFFER:
            try:
                batch.append(taken.receive_nowait())
            except trio.WouldBlock:
                break
        return batch

    def _feed(self, item: DriverInput, now: float) -> None:
        boss = self._boss
        if isinstance(item, FrameIn):
            self._step("frame", partial(boss.frame_received, item.text, now))
        elif isinstance(item, Committed):
            for row in item.items:
                if self._posted is not None:
                    self._queued_at[row.id] = item.at
                boss.post_queued(row, now)
        elif isinstance(item, Request):
            timeout = self._request_timeout if item.timeout is None else item.timeout
            boss.request(item.frame, item.reply, now=now, timeout=timeout)
        elif isinstance(item, RetryNow):
            self._step("retry_now", partial(boss.retry_now, now))
        elif isinstance(item, Opened):
            self._frames = item.frames
            self._step("connected", partial(boss.connected, now))
        else:
            self._frames = None
            fraction = self._fraction()
            self._step("lost", partial(boss.connection_lost, item.reason, now, fraction))

    def _step(self, what: str, call: Callable[[], None]) -> None:
        before = self._boss.state
        call()
        if self._boss.state is not before:
            log.debug("relay link[%s].%s -> [%s]", before.name, what, self._boss.state.name)

    def _publish(self) -> None:
        boss = self._boss
        self.seen = Seen(
            boss.state, boss.last_error, boss.relay_key, boss.queued, boss.attempts
        )

    # --- carrying out what the boss decided -----------------------------------------------------

    async def _carry_out(self) -> None:
        """The boss's events, in order (a run of arrivals is one commit), and its frames."""
        while events := self._boss.events_received():
            done = 0
            while done < len(events):
                arrived: list[w.Op] = []
                for event in events[done:]:
                    if not isinstance(event, ev.OpArrived):
                        break
                    arrived.append(event.op)
                if arrived:
                    await self._arrived(arrived)
                    done += len(arrived)
                else:
                    await self._handle(events[done])
                    done += 1
                await self._write()
        await self._write()

    async def _write(self) -> None:
        """Hand the boss's frames to the open connection's writer (none open: they are moot)."""
        for text in self._boss.data_to_send():
            if not await self._send(text):
                return

    async def _send(self, item: str | Close) -> bool:
        if self._frames is None:
            return False
        try:
            # Without yielding while the writer's channel has room: a checkpoint per frame was
            # a scheduler pass per frame for the driver (the writer wakes either way).
            self._frames.send_nowait(item)
        except trio.WouldBlock:
            try:
                await self._frames.send(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return False
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the connection ended; Closed is on its way
        return True

    async def _arrived(self, ops: list[w.Op]) -> None:
        """Commit inbound ops with their cursors, then hand each on and acknowledge it.

        Handing on is ringing the room's doorbell, once per room and batch, when its actor runs
        (no hop through the router: the room reads what arrived from the store); otherwise the
        router hears of each op and starts the room."""
        await self._store.commit_inbound_many(ops, time.time())
        rung: set[str] = set()
        for op in ops:
            await sim_hooks.handoff("handoff.link_to_router")
            if op.room not in rung:
                if self._ring is not None and self._ring(op.room):
                    rung.add(op.room)
                else:
                    await self._events.send(
                        InboundOp(op.room, op.seq, op.sender, op.op_id, op.body, op.ts)
                    )
            self._boss.op_committed(op.room, op.seq)

    async def _handle(self, event: ev.LinkEvent) -> None:
        store, boss = self._store, self._boss
        if isinstance(event, ev.Dial):
            self._dials.send_nowait(None)  # the dialer waits for it: the boss dials once per loss
        elif isinstance(event, ev.Drop):
            if event.refused_key:
                log.warning("relay link: %s", event.reason)
            await self._send(Close(event.reason))
        elif isinstance(event, ev.PostAccepted):
            queued_at = self._queued_at.pop(event.item.id, None)
            if queued_at is not None and self._posted is not None:
                now = trio.current_time()
                self._posted(now - queued_at, now)
            if await store.mark_sent(event.item, event.seq, event.ts):
                boss.op_committed(event.item.room, event.seq)  # acknowledge our own post
            await self._events.send(OpSent(event.item.room, event.item.op_id, event.seq))
        elif isinstance(event, ev.PostRejected):
            self._queued_at.pop(event.item.id, None)
            await store.drop_post(event.item, event.error)
            await self._events.send(OpRefused(event.item.room, event.item.op_id, event.error))
        elif isinstance(event, ev.ResealWanted):
            resealed = Resealed(as_is=True) if self._reseal is None else (
                await self._reseal(event.item)
            )
            boss.resealed(event.item, resealed, trio.current_time())
        elif isinstance(event, ev.RoomJoined):
            await store.track_room(event.room)
        elif isinstance(event, ev.RoomLeft):
            await store.forget_room(event.room)
        elif isinstance(event, ev.RelayKeySeen):
            await store.pin_relay_key(self._url, event.relay_key)
            log.info("relay link: pinned key %s for %s", event.relay_key.hex()[:16], self._url)
            now = trio.current_time()
            self._step("pinned", partial(boss.relay_key_pinned, event.relay_key, now))
        elif isinstance(event, ev.ReplyArrived | ev.RequestFailed):
            value = event.frame if isinstance(event, ev.ReplyArrived) else event.error
            answer(event.token, value)  # type: ignore[arg-type]  # tokens are reply channels
        elif isinstance(event, ev.PushArrived):
            await self._events.send(RelayPush(event.frame))
        else:
            await self._link_event(event)

    async def _link_event(self, event: ev.LinkEvent) -> None:
        if isinstance(event, ev.LinkReady):
            self._history.ready(trio.current_time())
            self._vouch.clear()  # from now on, frames and pongs prove we are alive
            failed = self._losses.cleared(self._url)
            after = f" after {failed} more failed attempt(s)" if failed else ""
            log.info("relay link: ready on %s%s", self._url, after)
            await self._events.send(LinkUp(self._url, event.relay_key, event.rooms, event.missing))
        elif isinstance(event, ev.LinkLost):
            now = trio.current_time()
            self._history.lost(now, event.reason)
            say = self._losses.seen(self._url, event.reason, now)
            if say is not None:
                log.info("relay link: %s lost (%s); retrying in %.2f s%s", self._url,
                         event.reason, event.retry_in, say.note)
            self._vouch.bound(event.retry_in)
            await self._events.send(LinkDown(self._url, event.reason))
        elif isinstance(event, ev.RelayComplained):
            log.warning("relay link: the relay complained: %s (%s)", event.message, event.code)
