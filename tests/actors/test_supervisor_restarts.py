"""One-for-one restarts, backoff and restart intensity, on trio's autojump clock."""

from __future__ import annotations

import logging

import attrs
import pytest
import trio
import trio.testing
from trio.testing import MockClock

from crosstalk.actors.context import ActorContext
from crosstalk.actors.health import ActorHealth, ActorState
from crosstalk.actors.supervisor import RETURNED, Restart, Supervisor
from crosstalk.errors import CrosstalkError, StorageFull
from tests.actors.fakes import (
    GroupCrasher,
    Recorder,
    Report,
    ScriptedCrasher,
    next_report,
    open_reports,
    quiet_until,
    report,
    running,
)


def _health(supervisor: Supervisor) -> dict[str, ActorHealth]:
    return {health.name: health for health in supervisor.statistics()}


async def _starts_of(
    reports: trio.MemoryReceiveChannel[Report], name: str, count: int
) -> list[float]:
    """Virtual times of the next ``count`` starts of ``name`` (other reports are skipped)."""
    times: list[float] = []
    while len(times) < count:
        who, what, at = await next_report(reports, within=60)
        if (who, what) == (name, "start"):
            times.append(at)
    return times


async def test_crash_restarts_only_that_actor_and_keeps_messages_sent_meanwhile(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash restarts only that actor, after its backoff; messages sent meanwhile are kept."""
    caplog.set_level(logging.DEBUG, logger="crosstalk.actors.supervisor")
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=10.0, backoff_initial=0.5)) as sup:
        to_a = await sup.start_actor("a", Recorder(out))
        to_b = await sup.start_actor("b", Recorder(out))
        assert await next_report(reports, within=1) == ("a", "start", 0.0)
        assert await next_report(reports, within=1) == ("b", "start", 0.0)

        await to_a.send("boom")
        await to_a.send("m1")
        await to_a.send("m2")
        await trio.testing.wait_all_tasks_blocked()
        health = _health(sup)
        assert health["a"] == ActorHealth(
            name="a",
            state=ActorState.RESTARTING,
            restarts=1,
            last_error="ValueError: boom",
            beat_age_s=0.0,
            inbox=2,
        )
        assert health["b"].restarts == 0
        assert health["b"].state is ActorState.RUNNING

        assert await next_report(reports, within=1) == ("a", "start", 0.5)
        assert await next_report(reports, within=1) == ("a", "m1", 0.5)
        assert await next_report(reports, within=1) == ("a", "m2", 0.5)
        await to_b.send("still here")
        assert await next_report(reports, within=1) == ("b", "still here", 0.5)
        assert [h.restarts for h in sup.statistics()] == [1, 0]

    crashes = [r for r in caplog.records if r.getMessage() == "actor a crashed"]
    assert len(crashes) == 1
    assert crashes[0].levelno == logging.ERROR
    assert crashes[0].exc_info is not None and isinstance(crashes[0].exc_info[1], ValueError)
    assert any(
        r.levelno == logging.INFO and r.getMessage() == "actor a restarting in 0.500 s (restart 1)"
        for r in caplog.records
    )
    traces = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert traces.count("actor a[RUNNING].crashed -> [RESTARTING]") == 1
    assert traces.count("actor a[RESTARTING].instance_started -> [STARTING]") == 1


async def test_crash_loop_is_failed_after_the_limit_and_siblings_keep_running(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """More than max_restarts restarts within the window marks the actor FAILED, nothing else."""
    caplog.set_level(logging.INFO, logger="crosstalk.actors.supervisor")
    out, reports = open_reports()
    supervisor = Supervisor(
        heartbeat=100.0, max_restarts=5, window=60.0, backoff_initial=0.25, backoff_max=1.0
    )
    async with running(supervisor) as sup:
        to_c = await sup.start_actor("c", ScriptedCrasher(out, [0.0] * 6))
        to_s = await sup.start_actor("s", Recorder(out))

        # Backoff doubles from 0.25 s and is capped at 1.0 s: restarts at +0.25, +0.5, +1, +1, +1.
        assert await _starts_of(reports, "c", 6) == [0.0, 0.25, 0.75, 1.75, 2.75, 3.75]
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 3.75
        health = _health(sup)
        assert health["c"] == ActorHealth(
            name="c",
            state=ActorState.FAILED,
            restarts=5,
            last_error="ValueError: crash 5",
            beat_age_s=0.0,
            inbox=0,
        )
        assert health["s"].state is ActorState.RUNNING
        assert health["s"].restarts == 0

        await to_c.send("into the void")  # a failed actor's inbox still takes messages
        await to_s.send("alive")
        assert await next_report(reports, within=1) == ("s", "alive", 3.75)
        await quiet_until(reports, 100.0)  # nothing restarts the failed actor
        assert _health(sup)["c"].inbox == 0  # and nothing piles up in its inbox

    failed = [r for r in caplog.records if "FAILED" in r.getMessage()]
    assert len(failed) == 1
    assert failed[0].levelno == logging.ERROR
    assert failed[0].exc_info is not None
    assert str(failed[0].exc_info[1]) == "crash 5"


async def test_restarts_older_than_the_window_do_not_count(autojump_clock: MockClock) -> None:
    """Restarts that left the window neither count towards FAILED nor grow the backoff."""
    out, reports = open_reports()
    supervisor = Supervisor(
        heartbeat=100.0, max_restarts=2, window=10.0, backoff_initial=1.0, backoff_max=8.0
    )
    async with running(supervisor) as sup:
        await sup.start_actor("c", ScriptedCrasher(out, [0.0, 0.0, 12.0, 0.0, 0.0]))
        # Crashes at 0 and 1 (backoff 1 then 2); the one at 15 finds both older than 10 s, so
        # its backoff is back to 1; the crash at 18 is the third inside [8, 18] and fails it.
        assert await _starts_of(reports, "c", 5) == [0.0, 1.0, 3.0, 16.0, 18.0]
        await trio.testing.wait_all_tasks_blocked()
        health = _health(sup)["c"]
        assert health.state is ActorState.FAILED
        assert health.restarts == 4
        assert trio.current_time() == 18.0


async def test_start_actor_returns_when_an_actor_fails_before_it_was_ready(
    autojump_clock: MockClock,
) -> None:
    """An actor that never gets ready makes start_actor return once it is FAILED, not hang."""
    out, _reports = open_reports()
    supervisor = Supervisor(heartbeat=100.0, max_restarts=2, backoff_initial=0.25)
    async with running(supervisor) as sup:
        crasher = ScriptedCrasher(out, [0.0, 0.0, 0.0], crash_before_ready=True)
        to_c = await sup.start_actor("c", crasher)
        assert trio.current_time() == 0.75
        assert crasher.instances == 3
        health = _health(sup)["c"]
        assert health.state is ActorState.FAILED
        assert health.restarts == 2
        to_c.send_nowait("taken")  # the inbox still takes messages, and is kept empty
        await trio.testing.wait_all_tasks_blocked()
        assert _health(sup)["c"].inbox == 0


async def test_crash_inside_an_actors_own_nursery_is_contained(autojump_clock: MockClock) -> None:
    """An ExceptionGroup from an actor's nursery restarts that actor and nothing else."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=5.0, backoff_initial=0.5)) as sup:
        await sup.start_actor("g", GroupCrasher(out))
        to_s = await sup.start_actor("s", Recorder(out))
        assert await _starts_of(reports, "g", 2) == [0.0, 0.5]
        await trio.testing.wait_all_tasks_blocked()
        health = _health(sup)
        assert health["g"].state is ActorState.RUNNING
        assert health["g"].restarts == 1
        assert health["g"].last_error is not None
        assert health["g"].last_error.startswith("ExceptionGroup: ")
        assert health["s"].restarts == 0
        await to_s.send("fine")
        assert await next_report(reports, within=1) == ("s", "fine", 0.5)


@pytest.mark.parametrize("plant", [False, True])
async def test_a_permanent_actor_that_returns_is_restarted_as_a_crash(
    plant: bool,
    autojump_clock: MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An actor meant to run for the daemon's life that returns (the relay link did, after an
    8 s relay freeze, and nothing restarted it) is restarted after the crash backoff, counted
    toward the intensity limit and logged at ERROR; a transient one beside it finishes for good.
    The planted bug takes every return as the end, as the supervisor once did."""
    if plant:
        monkeypatch.setattr(Supervisor, "_return_ends", staticmethod(lambda child: True))
    caplog.set_level(logging.INFO, logger="crosstalk.actors.supervisor")
    out, reports = open_reports()
    supervisor = Supervisor(
        heartbeat=100.0, max_restarts=2, window=60.0, backoff_initial=0.5, backoff_max=8.0
    )
    async with running(supervisor) as sup:
        returner = ScriptedCrasher(out, [1.0, 1.0, 1.0], returns=True)
        await sup.start_actor("p", returner)
        done = ScriptedCrasher(out, [1.0], returns=True)
        await sup.start_actor("t", done, restart=Restart.TRANSIENT)
        await quiet_until_blocked_at(30.0)
        health = _health(sup)
    assert done.instances == 1
    assert health["t"].state is ActorState.STOPPED
    assert health["t"].restarts == 0
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    if plant:
        assert returner.instances == 1
        assert health["p"].state is ActorState.STOPPED
        assert errors == []
        return
    # Returns at 1, 2.5 (backoff 0.5) and 4.5 (backoff 1): the third is one too many.
    assert returner.instances == 3
    assert [at for who, what, at in _drain(reports) if (who, what) == ("p", "start")] == [
        0.0, 1.5, 3.5,
    ]
    assert health["p"].state is ActorState.FAILED
    assert health["p"].restarts == 2
    assert health["p"].last_error == RETURNED
    returned = "actor p returned, but it is meant to run for the daemon's life; restarting it"
    assert sum(message.startswith(returned) for message in errors) == 3
    assert any(message.startswith("actor p FAILED") for message in errors)


async def quiet_until_blocked_at(deadline: float) -> None:
    """Let virtual time run to ``deadline`` and every task settle there."""
    await trio.sleep_until(deadline)
    await trio.testing.wait_all_tasks_blocked()


def _drain(reports: trio.MemoryReceiveChannel[Report]) -> list[Report]:
    drained: list[Report] = []
    while True:
        try:
            drained.append(reports.receive_nowait())
        except trio.WouldBlock:
            return drained


class _FullDisk:
    """Each instance raises StorageFull (inside a nursery, as a group) while the disk is full."""

    def __init__(self, out: trio.MemorySendChannel[Report], full_until: float) -> None:
        self.out, self.full_until = out, full_until

    async def run(
        self, ctx: ActorContext[str], *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        if trio.current_time() < self.full_until:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_write_to_full_disk)
        report(self.out, ctx.name, "start")
        async for message in ctx:
            report(self.out, ctx.name, message)


async def _write_to_full_disk() -> None:
    raise StorageFull("database or disk is full")


async def test_a_full_disk_never_makes_an_actor_failed(autojump_clock: MockClock) -> None:
    """Crashes on a full disk past max_restarts wait backoff_max and retry (not FAILED): once
    the disk has room again the actor runs (a relay link once stayed FAILED: sim seed 9)."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=10.0, max_restarts=2, backoff_max=1.0)) as sup:
        inbox = await sup.start_actor("a", _FullDisk(out, full_until=20.0))
        started = await next_report(reports, within=30)
        assert started[:2] == ("a", "start") and 20.0 <= started[2] <= 21.0
        await inbox.send("m")
        assert (await next_report(reports, within=1))[:2] == ("a", "m")
        assert _health(sup)["a"].state is ActorState.RUNNING


@attrs.frozen(eq=False)
class _Ask:
    """A request whose sender waits for an answer (crosstalk.actors.context.Refusable)."""

    reply: trio.MemorySendChannel[str | CrosstalkError]

    def refuse(self, error: CrosstalkError) -> None:
        self.reply.send_nowait(error)


async def test_a_request_to_a_failed_actor_is_refused_at_once_in_a_plain_sentence(
    autojump_clock: MockClock,
) -> None:
    """Its sender used to wait until its own client gave up (a control op: 120 s)."""
    out, reports = open_reports()
    supervisor = Supervisor(heartbeat=100.0, max_restarts=1, window=60.0, backoff_initial=0.25)
    async with running(supervisor) as sup:
        to_c = await sup.start_actor("c", ScriptedCrasher(out, [0.0] * 2))
        assert await _starts_of(reports, "c", 2) == [0.0, 0.25]
        await trio.testing.wait_all_tasks_blocked()
        assert _health(sup)["c"].state is ActorState.FAILED
        asked_at = trio.current_time()
        send, receive = trio.open_memory_channel[str | CrosstalkError](1)
        await to_c.send(_Ask(send))
        with trio.fail_after(1):
            answer = await receive.receive()
        assert trio.current_time() == asked_at
        assert isinstance(answer, CrosstalkError) and answer.code == "internal"
        assert answer.message.startswith("The daemon's c actor has stopped after repeated")
        assert "ValueError: crash 1" in answer.message
