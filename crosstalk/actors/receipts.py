"""The receipts actor: posts every receipt we owe a sender, until none is owed.

A receipt is owed from the transaction that holds (``delivered``) or marks read (``read``) a
message (crosstalk/store/receipts.py), so a cancelled ``ack`` or a daemon killed after that
commit still owes it. This actor drains the owed rows: for each room and state it posts one
``Receipt`` op and deletes the rows in the commit that queues it in the outbox (``send_op``'s
``also``), so a receipt is owed or queued, never both, at the cost of one commit. It drains when
it starts (whatever a previous daemon left owed), :data:`LINGER` seconds after it is woken (a
message in its inbox: an ack or a hold was committed), and again after :data:`RETRY` seconds
while a post fails for a reason that may pass (the relay link not up yet). The linger is what
makes a burst cheap: every message held wakes the actor, and without it each would cost the
sender a receipt op of its own (sealed, committed, relayed, pushed, opened and applied by every
member: in a two-person exchange of one message at a time, about 40% of each daemon's and the
relay's CPU); with it, the messages held within the linger share one receipt per room and state.
A room we left has nowhere to send a receipt: its rows are dropped. A room we were removed from
keeps them until we are let back in (see crosstalk/store/receipts.py). Posting a receipt twice
would be harmless anyway: the sender's state only moves forward.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections.abc import Callable
from functools import partial
from typing import Protocol, TypeVar

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.errors import CrosstalkError, NotAMember, UnknownRoom
from crosstalk.store.receipts import drop_unsendable, owed, settle
from crosstalk.wire.room_ops import Receipt, RoomOp

log = logging.getLogger(__name__)
R = TypeVar("R")

#: Seconds before owed receipts whose post failed for a passing reason are tried again.
RETRY = 30.0

#: Seconds from a wake to the drain it asks for. A receipt moves the sender's ``crosstalk sent``
#: from ``sent`` to ``delivered`` or ``read``; nobody's turn waits for it, so a quarter of a
#: second late is invisible, while the wakes that come in that time cost nothing more.
LINGER = 0.25


class StoreLike(Protocol):
    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...

    async def write(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...


class SendOpFn(Protocol):
    """:meth:`crosstalk.daemon.tree.Daemon.send_op`: seal an op and commit it to the outbox, with
    ``also`` in that commit."""

    async def __call__(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None,
        also: OutboxWrite | None = None,
    ) -> str: ...


def wake(inbox: trio.MemorySendChannel[None] | None) -> None:
    """Tell the actor something may be owed (never blocks; a full inbox is a pending wake)."""
    if inbox is None:
        return  # not started yet: it drains everything owed when it starts
    try:
        inbox.send_nowait(None)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _linger(ctx: ActorContext[None]) -> None:
    """Wait :data:`LINGER` seconds after a wake, taking in the wakes that come meanwhile (they
    ask for the same drain); waiting on the inbox, so the wait counts as a heartbeat."""
    with trio.move_on_after(LINGER):
        while True:
            await ctx.receive()


class ReceiptsActor:
    """Posts owed receipts; ``ready`` says whether there is an identity to post them with."""

    def __init__(self, *, store: StoreLike, send_op: SendOpFn, ready: Callable[[], bool]) -> None:
        self._store = store
        self._send_op = send_op
        self._ready = ready

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            again = await self.drain(ctx.beat) if self._ready() else True
            with trio.move_on_after(RETRY if again else math.inf):
                await ctx.receive()
                await _linger(ctx)

    async def drain(self, beat: Callable[[], None] = lambda: None) -> bool:
        """Post every owed receipt; ``True`` when some are left to try again later."""
        await self._store.write(drop_unsendable)
        skip: set[str] = set()  # rooms that refused a post this drain (removed just now)
        while True:
            batch = await self._store.read(partial(owed, skip=frozenset(skip)))
            if not batch:
                return False
            for item in batch:
                settled = partial(settle, rows=item.rows)
                try:
                    await self._send_op(
                        item.room_id, Receipt(item.state, item.msg_ids), also=settled
                    )
                except (UnknownRoom, NotAMember) as exc:  # kept: we may be let back in
                    log.info("%s receipt for room %s kept: %s", item.state, item.room_id,
                             exc.message)
                    skip.add(item.room_id)
                    continue
                except CrosstalkError as exc:
                    log.info("%s receipt for room %s not posted yet: %s", item.state,
                             item.room_id, exc.message)
                    return True
                beat()
