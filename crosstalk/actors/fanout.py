"""The fan-out of applied ops: one actor hands every committed batch to each subscriber.

Theory of operation. A room's actor commits a batch of applied ops, then hands it to this
actor's inbox (bounded) and goes straight on with the next batch; it no longer awaits the
features' listeners itself, so a slow listener (a full gate inbox, a receipt waiting for the
relay link's outbox) no longer stalls the room's applying. The actor's main task takes each
batch from its inbox, in commit order, and gives it to every subscriber by that subscriber's
stated policy; each subscriber has its own delivery task, so subscribers never wait for one
another within the buffers.

Policies (:class:`Policy`), stated by each subscriber:

* ``BLOCK``: every batch, in order, through the subscriber's own bounded channel
  (:data:`BUFFER` batches). Nothing is ever dropped: when the channel is full the fan-out waits,
  and once its inbox is full too the room's hand-off waits (backpressure), exactly as a room
  waited for its listeners before, only later. For subscribers that need each op: the attention
  gate, receipts, asks, memory, keys and names, decisions.
* ``COALESCE``: a level-triggered :class:`~crosstalk.actors.doorbell.Doorbell` per subscriber.
  The fan-out only rings it (never waits); the delivery task calls the subscriber once per batch
  of rings, with no ops, and the subscriber re-reads what it needs from the store. Nothing can be
  lost, because what it reads is committed before the bell rings. For subscribers that only need
  "something changed": the inbox push and the local web page.

A batch reaches every lane before any subscriber runs: the fan-out puts it in each lane that has
room without yielding in between, and waits only at a full one. Awaiting each lane's ``send`` in
turn let every subscriber ahead of a lane run (a store read each) before that lane even had the
batch; the gate, fourth in line, decided several scheduling rounds after the commit.

The channels and doorbells belong to the actor object, not to an instance, so batches queued for
a subscriber survive a restart of the fan-out, as the supervisor's inboxes do. A listener that
raises crashes this actor (the supervisor restarts it; that one batch is not retried for that
subscriber, as a crashed room never retried its listeners).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Sequence

import attrs
import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.doorbell import Doorbell
from crosstalk.core.room import Applied

log = logging.getLogger(__name__)

BUFFER = 16
"""Batches a ``BLOCK`` subscriber may be behind before the fan-out waits for it."""

AppliedListener = Callable[[list[Applied]], Awaitable[None]]
Nudged = Callable[[], Awaitable[None]]


class Policy(enum.Enum):
    """What a subscriber gets when it is slower than the rooms (see the module docstring)."""

    BLOCK = "block"
    COALESCE = "coalesce"


@attrs.frozen
class Subscriber:
    """One listener to applied ops and its policy. ``BLOCK`` listeners take the batch;
    ``COALESCE`` ones take nothing and re-read the store (wrap them with :func:`coalescing`)."""

    name: str
    listener: AppliedListener
    policy: Policy = Policy.BLOCK


def coalescing(name: str, nudged: Nudged) -> Subscriber:
    """A ``COALESCE`` subscriber: ``nudged`` is called once per batch of commits."""

    async def listener(applied: list[Applied]) -> None:
        del applied  # always empty: the subscriber reads the store
        await nudged()

    return Subscriber(name, listener, Policy.COALESCE)


class _Lane:
    """One subscriber's channel or doorbell; outlives the fan-out's instances."""

    def __init__(self, subscriber: Subscriber) -> None:
        self.subscriber = subscriber
        self.send, self.receive = trio.open_memory_channel[list[Applied]](BUFFER)
        self.doorbell = Doorbell()

    async def deliver(self) -> None:
        listener = self.subscriber.listener
        if self.subscriber.policy is Policy.COALESCE:
            while True:
                await self.doorbell.wait()
                await listener([])
        while True:
            await listener(await self.receive.receive())


class FanOut:
    """Hands each committed batch (its inbox) to every subscriber, by its policy."""

    def __init__(self, subscribers: Sequence[Subscriber]) -> None:
        self._lanes = [_Lane(s) for s in subscribers]

    def statistics(self) -> dict[str, int]:
        """Batches each ``BLOCK`` subscriber has been handed and not yet taken, by name."""
        return {
            lane.subscriber.name: lane.send.statistics().current_buffer_used
            for lane in self._lanes
            if lane.subscriber.policy is Policy.BLOCK
        }

    async def run(
        self,
        ctx: ActorContext[list[Applied]],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        async with trio.open_nursery() as nursery:
            for lane in self._lanes:
                nursery.start_soon(lane.deliver)
            task_status.started()
            async for batch in ctx:
                for lane in self._lanes:
                    await self._hand(ctx, lane, batch)
                ctx.beat()

    async def _hand(
        self, ctx: ActorContext[list[Applied]], lane: _Lane, batch: list[Applied]
    ) -> None:
        if lane.subscriber.policy is Policy.COALESCE:
            lane.doorbell.ring()
            return
        try:
            lane.send.send_nowait(batch)  # room in the lane: no yield before the next lane
            return
        except trio.WouldBlock:
            pass
        while True:
            # Waiting on a full BLOCK lane is backpressure, not a hang of this actor: beat while
            # waiting, so the watchdog never cancels it (which would lose the batch in hand).
            with trio.move_on_after(ctx.heartbeat / 2):
                await lane.send.send(batch)
                return
            ctx.beat()
            log.debug("fan-out: %s is %d batches behind", lane.subscriber.name, BUFFER)
