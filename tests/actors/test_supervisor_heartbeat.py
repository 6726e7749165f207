"""The heartbeat watchdog, asserted at exact virtual times on trio's autojump clock."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from crosstalk.actors.health import ActorState, LoopLag
from crosstalk.actors.supervisor import MISSED_HEARTBEAT, SUSPENDED_FRACTION, Supervisor
from tests.actors.fakes import Freezer, Recorder, next_report, open_reports, quiet_until, running


async def test_actor_that_stops_beating_is_restarted_within_the_stated_bound(
    autojump_clock: MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A frozen actor is cancelled at last beat + heartbeat and restarts after its backoff."""
    caplog.set_level(logging.INFO, logger="crosstalk.actors.supervisor")
    heartbeat, backoff = 4.0, 0.5
    out, reports = open_reports()
    supervisor = Supervisor(heartbeat=heartbeat, backoff_initial=backoff, backoff_max=8.0)
    async with running(supervisor) as sup:
        await sup.start_actor("f", Freezer(out, beat_after=3.0))
        await sup.start_actor("r", Recorder(out))
        assert await next_report(reports, within=1) == ("f", "start", 0.0)
        assert await next_report(reports, within=1) == ("r", "start", 0.0)
        assert await next_report(reports, within=10) == ("f", "beat", 3.0)
        # Stated bound (supervisor docstring): cancelled at exactly b + heartbeat, next
        # instance at exactly b + heartbeat + backoff, with b the last beat.
        assert await next_report(reports, within=10) == ("f", "cancelled", 3.0 + heartbeat)
        await trio.testing.wait_all_tasks_blocked()
        frozen, sibling = sup.statistics()
        assert frozen.state is ActorState.RESTARTING
        assert frozen.restarts == 1
        assert frozen.last_error == MISSED_HEARTBEAT
        assert sibling.state is ActorState.RUNNING
        assert sibling.restarts == 0

        _, _, restarted_at = await next_report(reports, within=10)
        assert restarted_at == 3.0 + heartbeat + backoff
        assert restarted_at <= 3.0 + heartbeat + heartbeat / 4 + backoff  # the brief's bound
        # The second time round the backoff has doubled.
        assert await next_report(reports, within=10) == ("f", "beat", 10.5)
        assert await next_report(reports, within=10) == ("f", "cancelled", 14.5)
        assert await next_report(reports, within=10) == ("f", "start", 15.5)
        assert [h.restarts for h in sup.statistics()] == [2, 0]

    missed = [r for r in caplog.records if "missed its heartbeat" in r.getMessage()]
    assert [r.levelno for r in missed] == [logging.WARNING, logging.WARNING]


async def test_idle_actor_waiting_in_receive_is_never_restarted(
    autojump_clock: MockClock,
) -> None:
    """An actor blocked in ctx.receive() survives a hundred heartbeats and still serves."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=1.0, backoff_initial=0.5)) as sup:
        to_idle = await sup.start_actor("idle", Recorder(out))
        assert await next_report(reports, within=1) == ("idle", "start", 0.0)
        await quiet_until(reports, 100.0)
        (health,) = sup.statistics()
        assert health.state is ActorState.RUNNING
        assert health.restarts == 0
        assert health.last_error is None
        assert health.beat_age_s == 0.0
        await to_idle.send("hello")
        assert await next_report(reports, within=1) == ("idle", "hello", 100.0)


async def test_actor_that_freezes_after_idling_is_caught_one_heartbeat_later(
    autojump_clock: MockClock,
) -> None:
    """Leaving receive() re-arms the watchdog even when it was sleeping with nothing to watch."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=1.0, backoff_initial=0.5)) as sup:
        to_idle = await sup.start_actor("idle", Recorder(out))
        assert await next_report(reports, within=1) == ("idle", "start", 0.0)
        await quiet_until(reports, 50.0)
        await to_idle.send("freeze")
        assert await next_report(reports, within=1) == ("idle", "freeze", 50.0)
        assert await next_report(reports, within=5) == ("idle", "cancelled", 51.0)
        assert await next_report(reports, within=5) == ("idle", "start", 51.5)


async def test_beat_age_counts_from_the_last_beat(autojump_clock: MockClock) -> None:
    """beat_age_s is the virtual time since the last ctx.beat() of a busy actor."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=10.0)) as sup:
        to_f = await sup.start_actor("f", Freezer(out, beat_after=2.0))
        assert await next_report(reports, within=1) == ("f", "start", 0.0)
        assert await next_report(reports, within=5) == ("f", "beat", 2.0)
        await quiet_until(reports, 3.5)
        for message in ("one", "two", "three"):
            await to_f.send(message)
        (health,) = sup.statistics()
        assert health.beat_age_s == 1.5
        assert health.inbox == 3
        assert health.state is ActorState.RUNNING


@pytest.mark.parametrize(("stopped", "plant", "cancelled_at"), [
    (100.0, False, 105.0),  # the watchdog wakes 96 s past its deadline
    (3.2, False, 8.2),  # the watchdog wakes only 0.2 s past it, as an on-time one would
    (3.2, True, 4.2),
])
async def test_a_process_that_was_stopped_gives_every_actor_a_fresh_heartbeat(
    stopped: float, plant: bool, cancelled_at: float,
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the whole daemon slept (SIGSTOP, a closed lid) nobody is blamed for not beating.

    The clock jumps with no task running, as when the process is stopped: the beats due
    meanwhile could not run, so everyone is excused, however late the watchdog itself wakes (a
    stop that ended just past its deadline once restarted the control actor, whose socket then
    refused a connection); an actor that really hangs is still caught, one heartbeat after the
    wake. The planted bug goes by the watchdog's own lateness alone: it cancels at the wake.
    """
    if plant:
        def late_only(self: Supervisor, now: float) -> float | None:
            late = now - self._watch_until
            return late if late > self._heartbeat * SUSPENDED_FRACTION else None

        monkeypatch.setattr(Supervisor, "_stood_still", late_only)
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=4.0, backoff_initial=0.5)) as sup:
        await sup.start_actor("f", Freezer(out, beat_after=500.0))
        await sup.start_actor("r", Recorder(out))
        assert await next_report(reports, within=1) == ("f", "start", 0.0)
        assert await next_report(reports, within=1) == ("r", "start", 0.0)
        await trio.sleep(1.0)
        autojump_clock.jump(stopped)
        assert await next_report(reports, within=10) == ("f", "cancelled", cancelled_at)
        await trio.testing.wait_all_tasks_blocked()
        assert [h.restarts for h in sup.statistics()] == [1, 0]


async def test_a_loop_stopped_only_briefly_still_judges(autojump_clock: MockClock) -> None:
    """The loop standing still for under a quarter heartbeat is scheduling noise, not a stopped
    process: the watchdog, 0.4 s late, cancels the actor that hangs."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=4.0, backoff_initial=0.5)) as sup:
        await sup.start_actor("f", Freezer(out, beat_after=500.0))
        assert await next_report(reports, within=1) == ("f", "start", 0.0)
        await trio.sleep(3.5)
        autojump_clock.jump(0.9)  # stood still 3.5 -> 4.4; the watchdog's deadline was 4.0
        assert await next_report(reports, within=10) == ("f", "cancelled", 4.4)


@pytest.mark.parametrize("plant", [False, True])
async def test_the_worst_loop_lag_and_when_it_was_are_kept(
    plant: bool, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pulse (every 0.5 s at a 4 s heartbeat) notes how late the loop woke it: a 0.4 s stall
    ending at 1.9 is the worst, and a later 0.2 s one does not replace it. The planted bug keeps
    the latest late wake instead of the worst."""
    if plant:
        def latest(self: Supervisor, lag: float, now: float) -> None:
            if lag > 0:
                self._worst_lag, self._worst_lag_at, self._worst_lag_wall = lag, now, self._wall()

        monkeypatch.setattr(Supervisor, "_lagged", latest)
    async with running(Supervisor(heartbeat=4.0, wall=lambda: 1e9 + trio.current_time())) as sup:
        assert sup.loop_lag() == LoopLag(0.0, None, 0.5, None)
        await trio.sleep(1.2)
        autojump_clock.jump(0.7)  # nothing runs from 1.2 to 1.9: the tick due at 1.5 waits
        await trio.sleep(1.2)  # to 3.1; the pulse ticks at 1.9, 2.4 and 2.9
        autojump_clock.jump(0.5)  # 3.1 to 3.6: the tick due at 3.4 waits 0.2 s
        await trio.sleep(1.0)
        lag = sup.loop_lag()
    expected = (0.2, 3.6) if plant else (0.4, 1.9)
    assert (lag.worst_s, lag.worst_at) == pytest.approx(expected)
    assert lag.worst_wall == 1e9 + lag.worst_at
    assert lag.period_s == 0.5
