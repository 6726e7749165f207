"""ActorContext and Liveness: what an actor instance sees, driven directly with real channels."""

from __future__ import annotations

import math

import trio
import trio.testing
from trio.testing import MockClock

from crosstalk.actors.context import ActorContext, Liveness


def _context(
    inbox: trio.MemoryReceiveChannel[str], rearmed: list[float], heartbeat: float = 2.0
) -> tuple[ActorContext[str], Liveness]:
    liveness = Liveness(trio.current_time(), heartbeat, rearmed.append)
    return ActorContext("a", inbox, liveness), liveness


async def test_context_exposes_name_inbox_and_heartbeat() -> None:
    """The context carries the actor's name, its inbox and the supervisor's heartbeat."""
    send, receive = trio.open_memory_channel[str](1)
    ctx, _ = _context(receive, [], heartbeat=2.5)
    assert (ctx.name, ctx.inbox, ctx.heartbeat) == ("a", receive, 2.5)
    await send.aclose()


async def test_beat_moves_the_deadline_and_resets_the_age(autojump_clock: MockClock) -> None:
    """A beat at t makes the next one due at t + heartbeat and the age count from t."""
    _send, receive = trio.open_memory_channel[str](1)
    ctx, liveness = _context(receive, [])
    assert liveness.deadline() == 2.0
    autojump_clock.jump(1.5)
    ctx.beat()
    assert liveness.deadline() == 3.5
    assert liveness.age(2.0) == 0.5


async def test_waiting_in_receive_counts_as_beating(autojump_clock: MockClock) -> None:
    """While receive() waits there is no deadline; on return the beat is fresh and re-armed."""
    send, receive = trio.open_memory_channel[str](1)
    rearmed: list[float] = []
    ctx, liveness = _context(receive, rearmed)
    async with trio.open_nursery() as nursery:
        got: list[str] = []

        async def receive_one() -> None:
            got.append(await ctx.receive())

        nursery.start_soon(receive_one)
        await trio.testing.wait_all_tasks_blocked()
        assert liveness.deadline() == math.inf
        assert liveness.age(1000.0) == 0.0
        autojump_clock.jump(7.0)
        await send.send("hi")
    assert got == ["hi"]
    assert liveness.deadline() == 9.0
    assert rearmed == [9.0]


async def test_iterating_the_context_ends_when_every_sender_closed() -> None:
    """async for over the context yields each message and stops at end of channel."""
    send, receive = trio.open_memory_channel[str](3)
    ctx, _ = _context(receive, [])
    async with send:
        await send.send("one")
        await send.send("two")
    assert [message async for message in ctx] == ["one", "two"]
