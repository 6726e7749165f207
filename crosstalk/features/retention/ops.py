"""Retention's daemon side: the ``prune`` op, and the actor that applies the default daily.

``prune {older_than_days}`` deletes finished history older than that many days (default
:data:`~crosstalk.store.retention.DEFAULT_DAYS`; :mod:`crosstalk.store.retention` says exactly
what) in transactions of a bounded size, and answers how many rows went from each table. The
daemon does the same with the default every :data:`PRUNE_EVERY` seconds, first a minute after it
starts.
"""

from __future__ import annotations

import logging
import time
from typing import Protocol

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.errors import UsageError
from crosstalk.features.caps import Stored, Supervises
from crosstalk.features.feature import Plugs, op
from crosstalk.store.db import Store
from crosstalk.store.retention import DEFAULT_DAYS, more_to_do, prune
from crosstalk.wire.control.params import PruneParams
from crosstalk.wire.control.replies.daemon import PruneReply
from crosstalk.wire.control.table import PRUNE

log = logging.getLogger(__name__)

#: Seconds between the daemon's own prunes.
PRUNE_EVERY = 6 * 3600.0
#: Seconds after start before the first one (start-up has better things to do).
FIRST_PRUNE = 60.0
DAY = 86400.0


class Host(Stored, Supervises, Protocol):
    """What retention uses: the store it prunes and the actor that prunes it daily."""


async def prune_older_than(store: Store, days: float, now: float) -> dict[str, int]:
    """Prune everything finished before ``now - days`` days, one bounded transaction at a time."""
    cutoff = now - days * DAY
    total: dict[str, int] = {}
    while True:
        removed = await store.write(lambda conn: prune(conn, cutoff))
        for table, count in removed.items():
            total[table] = total.get(table, 0) + count
        if not more_to_do(removed):
            return total  # between batches, other writers take their turn at the store


class RetentionActor:
    """Applies the default retention every :data:`PRUNE_EVERY` seconds."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        wait = FIRST_PRUNE
        while True:
            with trio.move_on_after(wait):
                await ctx.receive()
            ctx.beat()
            removed = await prune_older_than(self._store, DEFAULT_DAYS, time.time())
            if any(removed.values()):
                log.info("retention: pruned %s", {k: v for k, v in removed.items() if v})
            ctx.beat()
            wait = PRUNE_EVERY


def plug(daemon: Host) -> Plugs:
    """The ``prune`` op, and the retention actor started with the daemon."""

    async def prune_op(params: PruneParams) -> PruneReply:
        days = DEFAULT_DAYS if params.older_than_days is None else params.older_than_days
        if not 0 <= days <= 36500:
            raise UsageError("--older-than is a number of days, 0 or more.")
        removed = await prune_older_than(daemon.store, days, time.time())
        return PruneReply(days, removed)

    async def start() -> None:
        await daemon.supervisor.start_actor("retention", RetentionActor(daemon.store))

    return Plugs(ops=(op(PRUNE, prune_op),), start=(start,))
