"""Rosters are applied in the order the relay sent them, whoever fetched one.

Seed 288 of the simulation: an invite fetched the roster, the relay answered before a member
joined, then pushed the roster with them joined; the push was applied first and the invite's
stale answer after it, leaving the member invited for good. Now a fetched roster is applied by
the membership actor from its inbox, among the pushes, and the fetch only waits for that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import trio
import trio.testing

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.router import MembershipNews
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import NotAMember, RelayUnreachable
from crosstalk.features.membership.actor import (
    APPLY_WITHIN,
    MembershipActor,
    MembershipInput,
    fetch_roster,
    membership_news,
)
from crosstalk.store import membership as q
from crosstalk.store.db import Store, open_store
from crosstalk.store.rooms import Room, add_room
from crosstalk.wire import relay as w
from tests.actors.fakes import running
from tests.wire.chain_helpers import History

ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
N0 = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
ROOM = "r1"
Inbox = trio.MemorySendChannel[MembershipInput]


def entry(keys: crypto.Keys, state: str) -> w.Member:
    """A roster entry for ``keys``, added (signed) by us."""
    sig = crypto.sign(ME, w.member_transcript(ROOM, keys.ed_pub, keys.x_pub))
    return w.Member(keys.fingerprint, keys.ed_pub, keys.x_pub, state, ME.fingerprint, sig)


BEFORE = [entry(ME, "joined"), entry(N0, "invited")]  # the relay's roster before n0 accepted
AFTER = [entry(ME, "joined"), entry(N0, "joined")]
HISTORY = History(ROOM)
HISTORY.do(ME, "create")
HISTORY.do(ME, "invite", N0)
ACCEPTED = HISTORY.make(N0, "accept")


def before(req: int | None) -> w.Roster:
    """The relay's word before n0 accepted: the roster and the history so far."""
    return w.Roster(req, ROOM, BEFORE, HISTORY.statements, 0)


def after(req: int | None) -> w.Roster:
    """After n0 accepted: the push carries the accept (statement 2)."""
    return w.Roster(req, ROOM, AFTER, [ACCEPTED], 2)


class Link:
    """The relay link as the membership actor sees it: each roster the relay sends is news to
    the router (in the wire's order), and a request's answer goes to its caller; ``script``
    says what happens for the one ``roster`` request."""

    def __init__(self, news: MembershipNews, script: Callable[[Link], Awaitable[w.Roster]]):
        self.news = news
        self.script = script

    async def request(
        self, frame: w.GetRoster, expect: type[w.Roster], *, within: float | None = None
    ) -> w.Roster:
        del expect, within
        assert frame.room == ROOM
        return await self.script(self)


async def _no_relay() -> RelayClient:
    raise AssertionError("the actor fetches nothing here")


async def _no_wake(room: str) -> None:
    del room


async def _nothing_joined(beat: Callable[[], None], within: float) -> list[str]:
    return []


@asynccontextmanager
async def membership(tmp_path: Path) -> AsyncIterator[tuple[Store, Inbox]]:
    """The real store holding room r1 (us joined, n0 invited) and a running membership actor."""
    async with open_store(tmp_path / "state.db") as store, running(
        Supervisor(heartbeat=5.0)
    ) as supervisor:
        room = Room(ROOM, "r", "shared", "joined", 0, 0.0)
        await store.write(lambda c: add_room(c, room, b"k" * 32))
        actor = MembershipActor(
            store=store, keys=lambda: ME, relay=_no_relay, wake=_no_wake, reconcile=_nothing_joined
        )
        inbox = await supervisor.start_actor("membership", actor)
        await membership_news(inbox.clone())(before(None))
        yield store, inbox


async def n0_state(store: Store) -> str:
    rows = await store.read(lambda c: q.roster(c, ROOM))
    return next(m.state for m in rows if m.fingerprint == N0.fingerprint)


async def test_a_stale_fetched_roster_does_not_undo_a_newer_push(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The relay answers the fetch, then pushes n0's join; the caller hears its answer last."""

    async def answered_then_pushed(link: Link) -> w.Roster:
        reply = before(7)
        await link.news(reply)  # the boss tells a roster reply as news, ahead of its answer
        await link.news(after(None))
        await trio.testing.wait_all_tasks_blocked()  # both applied before the caller resumes
        return reply

    async with membership(tmp_path) as (store, inbox):
        link = Link(membership_news(inbox.clone()), answered_then_pushed)
        assert await fetch_roster(store, cast(RelayClient, link), inbox, ROOM)
        assert await n0_state(store) == "member"


async def test_a_fetch_returns_only_once_the_actor_has_applied_its_roster(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The answer can reach the caller before its news reaches the actor: the caller waits."""
    reply = w.Roster(9, ROOM, AFTER, [*HISTORY.statements, ACCEPTED], 0)

    async def answered_first(link: Link) -> w.Roster:
        return reply

    async with membership(tmp_path) as (store, inbox):
        link = Link(membership_news(inbox.clone()), answered_first)
        done: list[bool] = []

        async def fetch() -> None:
            done.append(await fetch_roster(store, cast(RelayClient, link), inbox, ROOM))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fetch)
            await trio.testing.wait_all_tasks_blocked()
            assert done == [] and await n0_state(store) == "invited"
            await link.news(reply)
        assert done == [True] and await n0_state(store) == "member"


async def test_a_fetched_roster_whose_news_never_comes_fails_in_bounded_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """News lost on the way (a router restarting) leaves no caller hanging."""

    async def answered_news_lost(link: Link) -> w.Roster:
        return after(11)

    async with membership(tmp_path) as (store, inbox):
        link = Link(membership_news(inbox.clone()), answered_news_lost)
        start = trio.current_time()
        try:
            await fetch_roster(store, cast(RelayClient, link), inbox, ROOM)
        except RelayUnreachable:
            assert trio.current_time() - start == APPLY_WITHIN
        else:
            raise AssertionError("a roster never applied was reported applied")
        assert await n0_state(store) == "invited"


async def test_a_room_the_relay_no_longer_lets_us_into_is_marked_removed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The relay refuses the fetch with not_a_member: the room is marked removed, no wait."""

    async def refused(link: Link) -> w.Roster:
        raise NotAMember("You are not a member of that room.")

    async with membership(tmp_path) as (store, inbox):
        link = Link(membership_news(inbox.clone()), refused)
        assert not await fetch_roster(store, cast(RelayClient, link), inbox, ROOM)
        assert await store.read(q.removed_rooms) == [ROOM]
