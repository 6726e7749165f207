"""The membership actor: keeps every room's local roster at what its signed history gives.

Its inbox gets the relay's rosters (with the statements of each room's membership history they
carry) and ``room_gone`` pushes (from the router), and a
``Refresh`` whenever the link is (re)established: the pushes missed while away are replaced by
one ``roster`` request per joined room, tried again every ``REFRESH_RETRY`` seconds until it
succeeds. A room the relay no longer lets us into is marked
removed. After any change the room's actor is woken, because ops it held from a sender it could
not verify may now open. The rules are in :mod:`crosstalk.features.membership.core`; a push
past the history we hold asks the refresher for a fetch (never from the inbox loop itself, where
a fetch would wait on this very actor).

Rosters are applied only from the inbox, in the order the relay sent them: the link reports a
reply to a ``roster`` request as news too, ahead of the reply itself, and :func:`fetch_roster`
waits for the actor to apply that news instead of applying its reply
(:mod:`crosstalk.features.membership.answered`). The refresh runs in a task of its own, so the
inbox keeps being applied while it waits on its fetches.
"""

from __future__ import annotations

import contextlib
import logging
import math
import sqlite3
import time
from collections.abc import Awaitable, Callable

import attrs
import trio

from crosstalk import crypto, sim_hooks
from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkUp
from crosstalk.actors.router import MembershipNews
from crosstalk.errors import (
    CrosstalkError,
    RelayUnreachable,
    RemoteProtocolError,
)
from crosstalk.features.membership.answered import AnsweredRosters
from crosstalk.features.membership.core import HistoryChange, apply_history
from crosstalk.logs import repeats_from_env
from crosstalk.store import membership as q
from crosstalk.store import membership_chain as mc
from crosstalk.store.db import Store
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState, Statement

log = logging.getLogger(__name__)

GONE_FROM_RELAY = {"unknown_room", "not_a_member"}
REFRESH_RETRY = 10.0
"""Seconds before a refresh that failed (a relay too slow to answer) is tried again."""
APPLY_WITHIN = 10.0
"""Seconds a fetch waits for the actor to apply the roster it fetched (local work only)."""


@attrs.frozen
class RosterSeen:
    """The relay's roster of ``room``: a push, or (``req``) the answer to a request, with the
    statements of the room's membership history it carried (from index ``chain_from``)."""

    room: str
    members: tuple[w.Member, ...]
    req: int | None = None
    chain: tuple[Statement, ...] = ()
    chain_from: int = 0


@attrs.frozen
class RoomLost:
    """The relay says we are out of ``room`` (``reason``: removed, left, declined, deleted)."""

    room: str
    reason: str
    by: str | None = None


@attrs.frozen
class Refresh:
    """Fetch the roster of every joined room (the link came up)."""


@attrs.frozen(eq=False)
class WaitApplied:
    """Tell ``reply`` (buffer >= 1) once the roster answering request ``req`` is applied."""

    req: int
    reply: trio.MemorySendChannel[None]


MembershipInput = RosterSeen | RoomLost | Refresh | WaitApplied
# Brings each room's own state in line with the relay's list (given a beat and a time bound);
# returns the joined rooms whose rosters to fetch. See lifecycle.reconcile_with_relay.
Reconcile = Callable[[Callable[[], None], float], Awaitable[list[str]]]
Keys = Callable[[], crypto.Keys]
Wake = Callable[[str], Awaitable[None]]
# Registers a waiter for the roster answering a request (the inbox, or the actor itself).
Register = Callable[[int, trio.MemorySendChannel[None]], Awaitable[None]]


def membership_news(inbox: trio.MemorySendChannel[MembershipInput]) -> MembershipNews:
    """What the router calls with the relay's news about membership: each piece becomes an
    input of this actor (given to the router by the daemon, so the router imports no feature)."""

    async def tell(news: w.Roster | w.RoomGone | LinkUp) -> None:
        await sim_hooks.handoff("handoff.router_to_membership")
        if isinstance(news, w.Roster):
            await inbox.send(RosterSeen(news.room, tuple(news.members), news.req,
                                        tuple(news.chain), news.chain_from))
        elif isinstance(news, w.RoomGone):
            await inbox.send(RoomLost(news.room, news.reason, news.by))
        else:
            await inbox.send(Refresh())

    return tell


def refresh_rooms(inbox: trio.MemorySendChannel[MembershipInput]) -> None:
    """Ask the membership actor (``inbox``) to reconcile with the relay now, as after a
    link-up, without waiting: a refresh already queued covers this one."""
    with contextlib.suppress(trio.WouldBlock, trio.BrokenResourceError):
        inbox.send_nowait(Refresh())


class HeldHistories:
    """Each room's history as last read or written here, and the chain state it gives, so a
    push neither decodes nor replays the whole history again (a room of n gets about 2n pushes
    while it is built: replaying each time was O(n^2) per member, 0.65 s at 200). Used only
    while the store's head (index and link) is still the one it ends at, so a rolled-back
    write or another writer makes it read and replay afresh."""

    def __init__(self) -> None:
        self._rooms: dict[str, tuple[list[Statement], bytes, ChainState]] = {}

    def held(self, conn: sqlite3.Connection, room: str) -> tuple[list[Statement], ChainState]:
        """The history the store holds for ``room``, and its state (extended in place by
        :func:`apply_history`; :meth:`extended` then says what was stored)."""
        index, link = mc.head(conn, room)
        hit = self._rooms.get(room)
        # A state longer than its statements was extended by a write that did not commit.
        if (hit is not None and len(hit[0]) == index + 1 and hit[1] == link
                and hit[2].length == len(hit[0])):
            return hit[0], hit[2]
        held = mc.statements(conn, room)
        state = ChainState.replay(room, held, verify=False)
        self._rooms[room] = (held, link, state)
        return held, state

    def extended(self, room: str, held: list[Statement], state: ChainState,
                 added: tuple[tuple[Statement, bytes], ...]) -> None:
        if added:
            held.extend(stmt for stmt, _ in added)
            self._rooms[room] = (held, added[-1][1], state)


async def apply_roster(
    store: Store, keys: crypto.Keys, seen: RosterSeen, histories: HeldHistories | None = None
) -> HistoryChange | None:
    """Take the relay's word about a room's membership: the statements that extend the history
    we hold, verified, and the roster that history gives; None if the room is not ours."""
    own = (keys.fingerprint, keys.ed_pub, keys.x_pub)
    room = seen.room
    cache = histories or HeldHistories()

    def write(conn: sqlite3.Connection) -> HistoryChange | None:
        if not q.room_exists(conn, room):
            return None
        held, state = cache.held(conn, room)
        result = apply_history(room, held, seen.chain_from, seen.chain, seen.members,
                               q.roster(conn, room), q.trusted_keys(conn, own), keys.fingerprint,
                               state=state)
        mc.append(conn, room, len(held), list(result.added))
        cache.extended(room, held, state, result.added)
        if result.change is not None:
            q.write_roster(conn, room, result.change.rows)
        if result.alarm is not None and mc.raise_alarm(conn, room, result.alarm, time.time()):
            log.warning("room %s: %s", room, result.alarm)
        # The history has us out, whatever the relay's rows say: a relay that lists us again
        # after a removal does not make us a member (we would only name ourselves there).
        if result.out and q.mark_removed(conn, room, result.removed_by, time.time()):
            log.info("room %s: the membership history has us out", room)
        return result

    return await store.write(write)


async def fetch_roster(
    store: Store,
    relay: RelayClient,
    membership: trio.MemorySendChannel[MembershipInput],
    room: str,
    *,
    within: float | None = None,
) -> bool:
    """Ask the relay for a room's roster and return once the membership actor has applied it
    (in the relay's order, among its pushes); False if the relay no longer lets us into the
    room, which is then marked removed.

    Raises:
        RelayUnreachable: the relay did not answer, or the answer was not applied in time.
    """
    async def register(req: int, reply: trio.MemorySendChannel[None]) -> None:
        await membership.send(WaitApplied(req, reply))

    return await _fetch_applied(store, relay, register, room, within)


async def _fetch_applied(
    store: Store, relay: RelayClient, register: Register, room: str, within: float | None
) -> bool:
    have = (await store.read(lambda conn: mc.head(conn, room)))[0] + 1
    try:
        reply = await relay.request(w.GetRoster(0, room, have), w.Roster, within=within)
    except CrosstalkError as exc:
        if exc.code not in GONE_FROM_RELAY:
            raise
        await store.write(lambda conn: q.mark_removed(conn, room, None, time.time()))
        return False
    if reply.req is None:
        raise RemoteProtocolError("the relay answered a roster request with a push")
    send, receive = trio.open_memory_channel[None](1)
    async with receive:
        with trio.move_on_after(APPLY_WITHIN if within is None else within):
            await register(reply.req, send)
            await receive.receive()
            return True
    raise RelayUnreachable(f"The roster of {room} was fetched but not applied in time.")


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
        self._answered = AnsweredRosters()
        # Rooms whose history we could not bring up to date (the relay offered what does not
        # verify, or a push past what we hold): refreshed again every REFRESH_RETRY seconds,
        # so a member lied to once catches up once the relay tells the truth again.
        self._unsettled: set[str] = set()
        self._histories = HeldHistories()
        # A relay that cannot answer fails every REFRESH_RETRY the same way: said once per
        # reason, then summarised.
        self._refresh_failing = repeats_from_env()
        self._started = False

    async def run(
        self,
        ctx: ActorContext[MembershipInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self._answered = AnsweredRosters()  # this instance's; waiters of an old one time out
        self._histories = HeldHistories()
        wanted, wants = trio.open_memory_channel[None](1)
        if self._started:
            # A restart: the news the crashed instance had taken (a roster whose write failed
            # on a full disk) is gone, so fetch every roster again (sim seed 64).
            wanted.send_nowait(None)
        self._started = True
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._refresher, ctx, wants)
            task_status.started()
            while True:
                item = await ctx.receive()
                if isinstance(item, RosterSeen):
                    await self._roster(item, wanted)
                elif isinstance(item, RoomLost):
                    await self._lost(item)
                elif isinstance(item, WaitApplied):
                    self._answered.wait_for(item.req, item.reply)
                else:
                    with contextlib.suppress(trio.WouldBlock):
                        wanted.send_nowait(None)  # one already wanted covers this one

    async def _roster(self, item: RosterSeen, wanted: trio.MemorySendChannel[None]) -> None:
        result = await apply_roster(self._store, self._keys(), item, self._histories)
        if item.req is not None:
            self._answered.applied(item.req)
        if result is None:
            return
        if result.behind or result.refused:
            self._unsettled.add(item.room)
            with contextlib.suppress(trio.WouldBlock):  # fetch the rest (never from here, where
                wanted.send_nowait(None)  # a fetch would wait on this very actor)
        else:
            self._unsettled.discard(item.room)
        change = result.change
        if change is not None:
            if change.changed:
                log.info("room %s: joined %s, gone %s", item.room, change.joined, change.gone)
            await self._wake(item.room)

    async def _lost(self, item: RoomLost) -> None:
        # "left" and "declined" are our own doing; the op that did it forgets the room.
        if item.reason not in ("removed", "deleted"):
            return
        if await self._store.write(
            lambda conn: q.mark_removed(conn, item.room, item.by, time.time())
        ):
            log.info("room %s: removed by %s (%s)", item.room, item.by, item.reason)

    async def _refresher(
        self, ctx: ActorContext[MembershipInput], wants: trio.MemoryReceiveChannel[None]
    ) -> None:
        """Refresh when wanted; after a failure, again every ``REFRESH_RETRY`` seconds."""
        retry = math.inf  # seconds until a failed refresh is tried again
        while True:
            with trio.move_on_after(retry):
                await wants.receive()
            settled = await self._refresh(ctx) and not self._unsettled
            if not settled:  # what it left undone waits REFRESH_RETRY, not a loop of fetches
                with contextlib.suppress(trio.WouldBlock):
                    wants.receive_nowait()
            retry = math.inf if settled else REFRESH_RETRY

    async def _register(self, req: int, reply: trio.MemorySendChannel[None]) -> None:
        self._answered.wait_for(req, reply)

    async def _refresh(self, ctx: ActorContext[MembershipInput]) -> bool:
        """Bring every room up to date with the relay; False if that has to be tried again."""
        within = ctx.heartbeat / 2
        try:
            # First our own state in each room as the relay has it (finishing an accept or a
            # create whose answer was lost), then each joined room's roster.
            rooms = await self._reconcile(ctx.beat, within)
            self._unsettled &= set(rooms)  # a room we are out of is nothing to catch up on
            relay = await self._relay()
            for room in rooms:
                ctx.beat()
                await _fetch_applied(self._store, relay, self._register, room, within)
        except CrosstalkError as exc:
            # The pushes missed while we were away are only replaced by this: keep trying while
            # the link stays up (seed 233: one slow answer left a roster stale for good).
            say = self._refresh_failing.seen("refresh", exc.message, trio.current_time())
            if say is not None:
                log.info("rooms not brought up to date with the relay (%s); trying again in "
                         "%.0f s%s", exc.message, REFRESH_RETRY, say.note)
            return False
        if self._refresh_failing.cleared("refresh") is not None:
            log.info("rooms brought up to date with the relay again")
        return True
