"""Fake actors for the supervisor tests, and helpers to run a supervisor and read its reports.

Every fake reports what it does to the test as ``(actor name, what, virtual time)`` on a memory
channel the test owns, so tests wait on reports (never on sleeps) and assert exact virtual times.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.supervisor import Supervisor

Report = tuple[str, str, float]


def open_reports() -> tuple[trio.MemorySendChannel[Report], trio.MemoryReceiveChannel[Report]]:
    # Room for every report a test makes; send_nowait fails loudly if a test makes more.
    return trio.open_memory_channel[Report](100)


def report(out: trio.MemorySendChannel[Report], name: str, what: str) -> None:
    out.send_nowait((name, what, trio.current_time()))


async def next_report(reports: trio.MemoryReceiveChannel[Report], *, within: float) -> Report:
    """The next report, which must arrive within ``within`` virtual seconds."""
    with trio.fail_after(within):
        return await reports.receive()


async def quiet_until(reports: trio.MemoryReceiveChannel[Report], deadline: float) -> None:
    """Let virtual time run to ``deadline``, failing if any report arrives before it."""
    with trio.move_on_at(deadline):
        got = await reports.receive()
        raise AssertionError(f"expected nothing before t={deadline}, got {got}")
    assert trio.current_time() == deadline


@asynccontextmanager
async def running(supervisor: Supervisor) -> AsyncIterator[Supervisor]:
    """Run ``supervisor`` for the duration of the block, then cancel it."""
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        yield supervisor
        nursery.cancel_scope.cancel()


class Recorder:
    """Reports each instance start and each message; raises on "boom", freezes on "freeze".

    Returns when every sender has closed the inbox.
    """

    def __init__(self, out: trio.MemorySendChannel[Report]) -> None:
        self.out = out

    async def run(
        self,
        ctx: ActorContext[str],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        report(self.out, ctx.name, "start")
        task_status.started()
        try:
            async for message in ctx:
                if message == "boom":
                    raise ValueError("boom")
                report(self.out, ctx.name, message)
                if message == "freeze":
                    await trio.sleep_forever()
        except trio.Cancelled:
            report(self.out, ctx.name, "cancelled")
            raise
        report(self.out, ctx.name, "end")


class Freezer:
    """Starts, works for ``beat_after`` seconds, beats once, then hangs without beating."""

    def __init__(self, out: trio.MemorySendChannel[Report], beat_after: float) -> None:
        self.out = out
        self.beat_after = beat_after

    async def run(
        self,
        ctx: ActorContext[str],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        report(self.out, ctx.name, "start")
        task_status.started()
        try:
            await trio.sleep(self.beat_after)
            ctx.beat()
            report(self.out, ctx.name, "beat")
            await trio.sleep_forever()
        except trio.Cancelled:
            report(self.out, ctx.name, "cancelled")
            raise


class ScriptedCrasher:
    """Instance ``n`` becomes ready, lives ``lifetimes[n]`` seconds, then raises.

    Instances past the script idle on their inbox. With ``crash_before_ready`` each scripted
    instance raises before calling ``task_status.started()``; with ``returns`` it returns
    normally instead of raising (reporting ``"return"``).
    """

    def __init__(
        self,
        out: trio.MemorySendChannel[Report],
        lifetimes: list[float],
        *,
        crash_before_ready: bool = False,
        returns: bool = False,
    ) -> None:
        self.out = out
        self.lifetimes = lifetimes
        self.crash_before_ready = crash_before_ready
        self.returns = returns
        self.instances = 0

    async def run(
        self,
        ctx: ActorContext[str],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        n = self.instances
        self.instances += 1
        report(self.out, ctx.name, "start")
        if n >= len(self.lifetimes):
            task_status.started()
            async for message in ctx:
                report(self.out, ctx.name, message)
            return
        if not self.crash_before_ready:
            task_status.started()
        await trio.sleep(self.lifetimes[n])
        if self.returns:
            report(self.out, ctx.name, "return")
            return
        raise ValueError(f"crash {n}")


class GroupCrasher:
    """Crashes from a task inside its own nursery, so the error leaves as an ExceptionGroup."""

    def __init__(self, out: trio.MemorySendChannel[Report]) -> None:
        self.out = out
        self.instances = 0

    async def run(
        self,
        ctx: ActorContext[str],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        self.instances += 1
        report(self.out, ctx.name, "start")
        task_status.started()
        if self.instances > 1:
            async for message in ctx:
                report(self.out, ctx.name, message)
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_raise_lookup_error)
            await trio.sleep_forever()


async def _raise_lookup_error() -> None:
    raise LookupError("inner task")
