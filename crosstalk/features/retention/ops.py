"""Retention's daemon side: the ``prune`` op, and the actor that applies the default daily.

``prune {older_than_days}`` deletes finished history older than that many days (default
:data:`~crosstalk.store.retention.DEFAULT_DAYS`; :mod:`crosstalk.store.retention` says exactly
what) in transactions of a bounded size, and answers how many rows went from each table. The
daemon does the same with the default every :data:`PRUNE_EVERY` seconds, first a minute after it
starts. Every :data:`TRIM_HEARTBEATS` heartbeats it also trims the relay link's copies of sealed
ops that are done (``trim``: the outbox and ``relay_inbound``), with as long a grace, so those
tables hold what is in flight and ``state.db`` stops growing with every op sent (issue 41).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Protocol

import trio

from crosstalk.actors.children import ChildSpec
from crosstalk.actors.context import ActorContext
from crosstalk.errors import UsageError
from crosstalk.features.caps import Homed, Stored
from crosstalk.features.feature import Plugs, op
from crosstalk.store.db import Store
from crosstalk.store.retention import DEFAULT_DAYS, more_to_do, prune, trim
from crosstalk.wire.control.params import PruneParams
from crosstalk.wire.control.replies.daemon import PruneReply
from crosstalk.wire.control.table import PRUNE

log = logging.getLogger(__name__)

#: Seconds between the daemon's own prunes.
PRUNE_EVERY = 6 * 3600.0
#: Seconds after start before the first one (start-up has better things to do).
FIRST_PRUNE = 60.0
DAY = 86400.0
#: Heartbeats between trims of the link's finished copies, and the grace they get (10 s at the
#: default heartbeat): a post is looked up right after it is sequenced, never that long after.
TRIM_HEARTBEATS = 2


class Host(Stored, Homed, Protocol):
    """What retention uses: the store it prunes and trims, and the heartbeat that paces the trim."""


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


async def trim_older_than(store: Store, cutoff: float) -> dict[str, int]:
    """Trim the link's copies done before ``cutoff``, one bounded transaction at a time."""
    total: dict[str, int] = {}
    while True:
        removed = await store.write(lambda conn: trim(conn, cutoff))
        for table, count in removed.items():
            total[table] = total.get(table, 0) + count
        if not more_to_do(removed):
            return total


class RetentionActor:
    """Trims the link's copies every ``trim_every`` seconds; applies the default retention
    every :data:`PRUNE_EVERY` seconds."""

    def __init__(self, store: Store, *, trim_every: float) -> None:
        self._store = store
        self._trim_every = trim_every

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        prune_at = trio.current_time() + FIRST_PRUNE
        while True:
            wait = min(self._trim_every, max(0.0, prune_at - trio.current_time()))
            with trio.move_on_after(wait):
                await ctx.receive()
            ctx.beat()
            trimmed = await trim_older_than(self._store, time.time() - self._trim_every)
            if any(trimmed.values()):
                log.debug("retention: trimmed %s", {k: v for k, v in trimmed.items() if v})
            if trio.current_time() >= prune_at:
                removed = await prune_older_than(self._store, DEFAULT_DAYS, time.time())
                if any(removed.values()):
                    log.info("retention: pruned %s", {k: v for k, v in removed.items() if v})
                prune_at = trio.current_time() + PRUNE_EVERY
            ctx.beat()


async def prune_op(daemon: Host, params: PruneParams) -> PruneReply:
    """The ``prune`` op: drop finished history older than the days asked (30 by default)."""
    days = DEFAULT_DAYS if params.older_than_days is None else params.older_than_days
    if not 0 <= days <= 36500:
        raise UsageError("--older-than is a number of days, 0 or more.")
    removed = await prune_older_than(daemon.store, days, time.time())
    return PruneReply(days, removed)


def plug(daemon: Host) -> Plugs:
    """The ``prune`` op, and the retention actor started with the daemon."""
    return Plugs(
        ops=(op(PRUNE, functools.partial(prune_op, daemon)),),
        children=(ChildSpec("retention", functools.partial(
            RetentionActor, daemon.store, trim_every=daemon.heartbeat * TRIM_HEARTBEATS)),),
    )
