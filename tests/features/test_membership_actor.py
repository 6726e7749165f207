"""The membership actor keeps trying a refresh that failed, for as long as the link stays up.

The roster pushes missed while a daemon was away are replaced only by the refresh at link-up; if
the relay is too slow to answer it, nothing else would bring the rosters up to date until the
next reconnect (seed 233 of the simulation: one member saw a joiner as invited for good).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest
import trio
import trio.testing

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkUp
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import RelayUnreachable
from crosstalk.features.membership.actor import (
    REFRESH_RETRY,
    MembershipActor,
    MembershipInput,
    Refresh,
    RoomLost,
    RosterSeen,
    membership_news,
)
from crosstalk.store.db import open_store
from crosstalk.wire import relay as w
from tests.actors.fakes import running

KEYS = crypto.Keys(b"\x01" * 32, b"\x02" * 32)


class Relay:
    """A reconcile that fails ``failures`` times, then finds no rooms; counts the attempts."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[float] = []

    async def reconcile(self, beat: Callable[[], None], within: float) -> list[str]:
        del beat, within
        self.attempts.append(trio.current_time())
        if len(self.attempts) <= self.failures:
            raise RelayUnreachable("The relay did not answer in time.")
        return []


async def _never_asked() -> RelayClient:
    # No room to fetch a roster for: a client that has nothing (any use of it raises).
    return cast(RelayClient, object())


async def _no_wake(room: str) -> None:
    del room


@pytest.mark.parametrize("failures", [0, 1, 3])
async def test_a_failed_refresh_is_tried_again_until_it_succeeds(
    failures: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    relay = Relay(failures)
    async with open_store(tmp_path / "state.db") as store, running(
        Supervisor(heartbeat=5.0)
    ) as supervisor:
        actor = MembershipActor(
            store=store, keys=lambda: KEYS, relay=_never_asked, wake=_no_wake,
            reconcile=relay.reconcile,
        )
        inbox = await supervisor.start_actor("membership", actor)
        start = trio.current_time()
        await inbox.send(Refresh())
        await trio.sleep(REFRESH_RETRY * (failures + 5))  # long enough for every retry
    assert len(relay.attempts) == failures + 1  # one success, then no more tries
    gaps = [b - a for a, b in zip([start, *relay.attempts], relay.attempts, strict=False)]
    assert all(gap >= REFRESH_RETRY for gap in gaps[1:])  # not a busy loop


async def test_the_relays_membership_news_becomes_the_actors_inputs() -> None:
    """The router's pushes reach the membership actor as rosters seen, rooms lost, refreshes."""
    send, receive = trio.open_memory_channel[MembershipInput](3)
    tell = membership_news(send)
    member = w.Member("f1", b"ed", b"x", "joined", "f0", b"sig")
    await tell(w.Roster(None, "r1", [member]))
    await tell(w.RoomGone("r1", "removed", "f0"))
    await tell(LinkUp("ws://relay", b"k", [], []))
    assert [receive.receive_nowait() for _ in range(3)] == [
        RosterSeen("r1", (member,)), RoomLost("r1", "removed", "f0"), Refresh(),
    ]


class LyingThenHonest:
    """A relay whose answers to ``roster`` give the history out of order ``lies`` times, then
    as it is; each answer reaches the actor as news first, as the link's boss sends it."""

    def __init__(self, lies: int, history: list[w.Roster]) -> None:
        self.lies = lies
        self.history = history
        self.asked: list[float] = []
        self.news: Callable[[w.Roster], object] | None = None

    async def request(self, frame: w.GetRoster, expect: type, *, within: float | None = None
                      ) -> w.Roster:
        del expect, within
        self.asked.append(trio.current_time())
        honest = self.history[0]
        chain = honest.chain if len(self.asked) > self.lies else honest.chain[::-1]
        reply = w.Roster(len(self.asked), frame.room, honest.members, chain[frame.have:],
                         frame.have)
        assert self.news is not None
        await self.news(reply)  # type: ignore[misc]
        return reply


@pytest.mark.parametrize("lies", [0, 1, 3])
async def test_a_history_the_relay_lied_about_is_fetched_again_until_it_verifies(
    lies: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A fetch whose history does not verify leaves the room unsettled: fetched again every
    REFRESH_RETRY seconds (never a busy loop), and once it verifies, no more."""
    from crosstalk.store.rooms import Room, add_room
    from tests.wire.chain_helpers import History

    other = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
    h = History("r1")
    h.do(other, "create")
    h.do(other, "invite", KEYS)
    h.do(KEYS, "accept")
    relay = LyingThenHonest(lies, [w.Roster(None, "r1", [], h.statements, 0)])

    async def the_relay() -> RelayClient:
        return relay  # type: ignore[return-value]

    async def joined(beat: Callable[[], None], within: float) -> list[str]:
        return ["r1"]

    async with open_store(tmp_path / "state.db") as store, running(
        Supervisor(heartbeat=5.0)
    ) as supervisor:
        await store.write(lambda c: add_room(c, Room("r1", "r", "shared", "joined", 0, 0.0),
                                             b"k" * 32))
        actor = MembershipActor(store=store, keys=lambda: KEYS, relay=the_relay,
                                wake=_no_wake, reconcile=joined)
        inbox = await supervisor.start_actor("membership", actor)
        relay.news = membership_news(inbox.clone())
        await inbox.send(Refresh())
        await trio.sleep(REFRESH_RETRY * (lies + 5))
        from crosstalk.store import membership_chain as mc
        held = await store.read(lambda c: mc.head(c, "r1"))
    assert len(relay.asked) == lies + 1 and held == h.state.head()
    gaps = [b - a for a, b in itertools.pairwise(relay.asked)]
    assert all(gap >= REFRESH_RETRY for gap in gaps)
