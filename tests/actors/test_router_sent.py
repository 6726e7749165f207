"""The router's answer to those waiting for one of our ops to be sequenced (``WatchSent``)."""

from __future__ import annotations

import trio
import trio.testing

from crosstalk.actors.context import ActorContext, Liveness
from crosstalk.actors.relay_link_api import OpRefused, OpSent
from crosstalk.actors.router import Router, RouterInput, WatchSent
from crosstalk.errors import NotAMember


async def _waiting_for(op_id: str, *outcomes: RouterInput) -> int | str | None:
    """Run a router, watch ``op_id``, feed it ``outcomes``; the seq heard, None if the waiter's
    channel was closed (refused), "waiting" if neither came within a minute."""

    async def wake(room: str) -> None:
        pass

    inbox_send, inbox = trio.open_memory_channel[RouterInput](8)
    ctx = ActorContext("router", inbox, Liveness(trio.current_time(), 60.0, lambda _: None))
    reply_send, reply = trio.open_memory_channel[int](1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Router(wake_room=wake).run, ctx)
        await inbox_send.send(WatchSent(op_id, reply_send))
        for item in outcomes:
            await inbox_send.send(item)
        heard: int | str | None = "waiting"
        with trio.move_on_after(60):
            try:
                heard = await reply.receive()
            except trio.EndOfChannel:
                heard = None
        nursery.cancel_scope.cancel()
    return heard


async def test_a_sequenced_op_tells_its_waiter_the_seq(
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert await _waiting_for("op-1", OpSent("room", "op-1", 7)) == 7


async def test_a_refused_op_ends_its_waiter_instead_of_keeping_it_for_ever(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The relay will never sequence it: the waiter hears so at once (a memory ask of a room we
    were removed from used to leave a task waiting for good; a send waited its whole wait)."""
    refused = OpRefused("room", "op-1", NotAMember("you are not a joined member"))
    assert await _waiting_for("op-1", refused) is None


async def test_another_op_s_outcome_leaves_the_waiter_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    refused = OpRefused("room", "op-2", NotAMember("you are not a joined member"))
    assert await _waiting_for("op-1", refused, OpSent("room", "op-3", 1)) == "waiting"
