"""The membership actor: keeps every room's local roster at the relay's, checked by signature.

Its inbox gets the relay's roster pushes and ``room_gone`` pushes (from the router), and a
``Refresh`` whenever the link is (re)established: the pushes missed while away are replaced by
one ``roster`` request per joined room, tried again every ``REFRESH_RETRY`` seconds until it
succeeds. A room the relay no longer lets us into is marked
removed. After any change the room's actor is woken, because ops it held from a sender it could
not verify may now open. The rules are in :mod:`crosstalk.features.membership.core`.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import time
from collections.abc import Awaitable, Callable

import attrs
import trio

from crosstalk import crypto
from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkUp
from crosstalk.actors.router import MembershipNews
from crosstalk.errors import CrosstalkError
from crosstalk.features.membership.core import RosterChange, reconcile
from crosstalk.store import membership as q
from crosstalk.store.db import Store
from crosstalk.wire import relay as w

log = logging.getLogger(__name__)

GONE_FROM_RELAY = {"unknown_room", "not_a_member"}
REFRESH_RETRY = 10.0
"""Seconds before a refresh that failed (a relay too slow to answer) is tried again."""


@attrs.frozen
class RosterSeen:
    """The relay's roster of ``room`` (a push, or the answer to a request)."""

    room: str
    members: tuple[w.Member, ...]


@attrs.frozen
class RoomLost:
    """The relay says we are out of ``room`` (``reason``: removed, left, declined, deleted)."""

    room: str
    reason: str
    by: str | None = None


@attrs.frozen
class Refresh:
    """Fetch the roster of every joined room (the link came up)."""


MembershipInput = RosterSeen | RoomLost | Refresh
# Brings each room's own state in line with the relay's list (given a beat and a time bound);
# returns the joined rooms whose rosters to fetch. See lifecycle.reconcile_with_relay.
Reconcile = Callable[[Callable[[], None], float], Awaitable[list[str]]]
Keys = Callable[[], crypto.Keys]
Wake = Callable[[str], Awaitable[None]]


def membership_news(inbox: trio.MemorySendChannel[MembershipInput]) -> MembershipNews:
    """What the router calls with the relay's news about membership: each piece becomes an
    input of this actor (given to the router by the daemon, so the router imports no feature)."""

    async def tell(news: w.Roster | w.RoomGone | LinkUp) -> None:
        if isinstance(news, w.Roster):
            await inbox.send(RosterSeen(news.room, tuple(news.members)))
        elif isinstance(news, w.RoomGone):
            await inbox.send(RoomLost(news.room, news.reason, news.by))
        else:
            await inbox.send(Refresh())

    return tell


async def apply_roster(
    store: Store, keys: crypto.Keys, room: str, members: tuple[w.Member, ...]
) -> RosterChange | None:
    """Reconcile a room's local roster with the relay's; None if the room is not ours."""
    own = (keys.fingerprint, keys.ed_pub, keys.x_pub)

    def write(conn: sqlite3.Connection) -> RosterChange | None:
        if not q.room_exists(conn, room):
            return None
        change = reconcile(room, q.roster(conn, room), members, q.trusted_keys(conn, own))
        q.write_roster(conn, room, change.rows)
        return change

    change = await store.write(write)
    if change is not None and change.unverified:
        log.warning(
            "room %s: the relay lists %s, whom no signature we trust vouches for; left out",
            room, ", ".join(change.unverified),
        )
    return change


async def fetch_roster(
    store: Store, keys: crypto.Keys, relay: RelayClient, room: str, *, within: float | None = None
) -> RosterChange | None:
    """Ask the relay for a room's roster and reconcile; a room it no longer lets us into is
    marked removed (returns None)."""
    try:
        reply = await relay.request(w.GetRoster(0, room), w.Roster, within=within)
    except CrosstalkError as exc:
        if exc.code not in GONE_FROM_RELAY:
            raise
        await store.write(lambda conn: q.mark_removed(conn, room, None, time.time()))
        return None
    return await apply_roster(store, keys, room, tuple(reply.members))


class MembershipActor:
    """Follows the relay's rosters into the store; wakes rooms whose roster changed."""

    def __init__(
        self,
        *,
        store: Store,
        keys: Keys,
        relay: Callable[[], Awaitable[RelayClient]],
        wake: Wake,
        reconcile: Reconcile,
    ) -> None:
        self._store = store
        self._keys = keys
        self._relay = relay
        self._wake = wake
        self._reconcile = reconcile

    async def run(
        self,
        ctx: ActorContext[MembershipInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        retry = math.inf  # seconds until a failed refresh is tried again
        while True:
            with trio.move_on_after(retry) as waited:
                item = await ctx.receive()
            if waited.cancelled_caught:
                item = Refresh()
            if isinstance(item, RosterSeen):
                await self._roster(item.room, item.members)
            elif isinstance(item, RoomLost):
                await self._lost(item)
            else:
                retry = math.inf if await self._refresh(ctx) else REFRESH_RETRY

    async def _roster(self, room: str, members: tuple[w.Member, ...]) -> None:
        change = await apply_roster(self._store, self._keys(), room, members)
        if change is not None:
            if change.changed:
                log.info("room %s: joined %s, gone %s", room, change.joined, change.gone)
            await self._wake(room)

    async def _lost(self, item: RoomLost) -> None:
        # "left" and "declined" are our own doing; the op that did it forgets the room.
        if item.reason not in ("removed", "deleted"):
            return
        if await self._store.write(
            lambda conn: q.mark_removed(conn, item.room, item.by, time.time())
        ):
            log.info("room %s: removed by %s (%s)", item.room, item.by, item.reason)

    async def _refresh(self, ctx: ActorContext[MembershipInput]) -> bool:
        """Bring every room up to date with the relay; False if that has to be tried again."""
        within = ctx.heartbeat / 2
        try:
            # First our own state in each room as the relay has it (finishing an accept or a
            # create whose answer was lost), then each joined room's roster.
            rooms = await self._reconcile(ctx.beat, within)
            relay, keys = await self._relay(), self._keys()
            for room in rooms:
                ctx.beat()
                if await fetch_roster(self._store, keys, relay, room, within=within):
                    await self._wake(room)
        except CrosstalkError as exc:
            # The pushes missed while we were away are only replaced by this: keep trying while
            # the link stays up (seed 233: one slow answer left a roster stale for good).
            log.info("rooms not brought up to date with the relay (%s); trying again in %.0f s",
                     exc.message, REFRESH_RETRY)
            return False
        return True
