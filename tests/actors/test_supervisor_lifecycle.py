"""Starting, stopping and finishing actors at run time, and the supervisor's own life."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import trio
import trio.testing
from trio.testing import MockClock

from crosstalk.actors.health import ActorState
from crosstalk.actors.supervisor import Restart, Supervisor
from crosstalk.errors import LocalProtocolError
from tests.actors.fakes import (
    Recorder,
    ScriptedCrasher,
    next_report,
    open_reports,
    quiet_until,
    running,
)


async def test_actors_start_and_stop_at_run_time(autojump_clock: MockClock) -> None:
    """stop_actor cancels the actor, waits for it, closes its inbox and frees the name."""
    out, reports = open_reports()
    async with running(Supervisor()) as sup:
        to_a = await sup.start_actor("a", Recorder(out))
        await sup.start_actor("b", Recorder(out))
        assert [h.name for h in sup.statistics()] == ["a", "b"]
        assert await next_report(reports, within=1) == ("a", "start", 0.0)
        assert await next_report(reports, within=1) == ("b", "start", 0.0)

        assert await sup.stop_actor("a") is True
        # The instance had unwound before stop_actor returned.
        assert reports.receive_nowait() == ("a", "cancelled", 0.0)
        assert [h.name for h in sup.statistics()] == ["b"]
        with pytest.raises(trio.BrokenResourceError):
            to_a.send_nowait("anyone there?")

        assert await sup.stop_actor("a") is False
        await sup.start_actor("a", Recorder(out))
        assert await next_report(reports, within=1) == ("a", "start", 0.0)
        assert [h.name for h in sup.statistics()] == ["b", "a"]


async def test_stopping_an_unknown_name_does_nothing(autojump_clock: MockClock) -> None:
    """stop_actor on a name that was never started returns False and touches nobody."""
    out, _reports = open_reports()
    async with running(Supervisor()) as sup:
        await sup.start_actor("a", Recorder(out))
        assert await sup.stop_actor("nobody") is False
        (health,) = sup.statistics()
        assert (health.name, health.state) == ("a", ActorState.RUNNING)


async def test_stop_actor_ends_a_restart_backoff(autojump_clock: MockClock) -> None:
    """Stopping an actor that is waiting out its backoff ends it at once, with no restart."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=100.0, backoff_initial=30.0, backoff_max=30.0)) as sup:
        crasher = ScriptedCrasher(out, [0.0])
        await sup.start_actor("c", crasher)
        await trio.testing.wait_all_tasks_blocked()
        assert sup.statistics()[0].state is ActorState.RESTARTING
        assert await sup.stop_actor("c") is True
        assert trio.current_time() == 0.0
        assert sup.statistics() == []
        assert reports.receive_nowait() == ("c", "start", 0.0)
        await quiet_until(reports, 60.0)
        assert crasher.instances == 1


async def test_transient_actor_that_returns_is_stopped_and_not_restarted(
    autojump_clock: MockClock,
) -> None:
    """Closing a transient actor's inbox makes it return; it is STOPPED and never restarted."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=1.0)) as sup:
        to_a = await sup.start_actor("a", Recorder(out), restart=Restart.TRANSIENT)
        assert await next_report(reports, within=1) == ("a", "start", 0.0)
        await to_a.aclose()
        assert await next_report(reports, within=1) == ("a", "end", 0.0)
        await quiet_until(reports, 30.0)
        (health,) = sup.statistics()
        assert health.state is ActorState.STOPPED
        assert health.restarts == 0
        assert health.last_error is None
        assert await sup.stop_actor("a") is True
        assert sup.statistics() == []


async def test_statistics_show_an_actor_that_is_not_ready_yet_as_starting(
    autojump_clock: MockClock,
) -> None:
    """Until its first instance calls started(), an actor is STARTING and start_actor waits."""
    out, reports = open_reports()
    async with running(Supervisor(heartbeat=100.0)) as sup, trio.open_nursery() as nursery:
        nursery.start_soon(
            sup.start_actor, "slow", ScriptedCrasher(out, [5.0], crash_before_ready=True)
        )
        await trio.testing.wait_all_tasks_blocked()
        (health,) = sup.statistics()
        assert health.state is ActorState.STARTING
        assert health.beat_age_s == 0.0
        nursery.cancel_scope.cancel()
    assert reports.receive_nowait() == ("slow", "start", 0.0)


async def test_stopping_an_actor_that_is_still_starting_releases_start_actor(
    autojump_clock: MockClock,
) -> None:
    """stop_actor during a pending start_actor ends both; the returned inbox is closed."""
    out, _reports = open_reports()
    async with running(Supervisor(heartbeat=100.0)) as sup, trio.open_nursery() as nursery:
        returned: list[trio.MemorySendChannel[str]] = []

        async def start_slow() -> None:
            slow = ScriptedCrasher(out, [5.0], crash_before_ready=True)
            returned.append(await sup.start_actor("slow", slow))

        nursery.start_soon(start_slow)
        await trio.testing.wait_all_tasks_blocked()
        assert await sup.stop_actor("slow") is True
        await trio.testing.wait_all_tasks_blocked()
        assert trio.current_time() == 0.0
        assert sup.statistics() == []
        (to_slow,) = returned
        with pytest.raises(trio.BrokenResourceError):
            to_slow.send_nowait("hello?")


async def test_a_cancelled_start_leaves_no_actor_behind(autojump_clock: MockClock) -> None:
    """If the caller of start_actor is cancelled before the actor is ready, the name is freed."""
    out, _reports = open_reports()
    async with running(Supervisor(heartbeat=100.0)) as sup:
        with trio.move_on_after(1.0):
            await sup.start_actor("slow", ScriptedCrasher(out, [5.0], crash_before_ready=True))
        assert trio.current_time() == 1.0
        assert sup.statistics() == []
        await sup.start_actor("slow", Recorder(out))
        assert [h.state for h in sup.statistics()] == [ActorState.RUNNING]


async def test_names_are_unique_while_supervised(autojump_clock: MockClock) -> None:
    """Starting a second actor under a name that is in use is a LocalProtocolError."""
    out, _reports = open_reports()
    async with running(Supervisor()) as sup:
        await sup.start_actor("a", Recorder(out))
        with pytest.raises(LocalProtocolError, match="already supervised"):
            await sup.start_actor("a", Recorder(out))
        assert len(sup.statistics()) == 1


async def test_start_actor_needs_a_running_supervisor(autojump_clock: MockClock) -> None:
    """start_actor before run() (or after it ended) is a LocalProtocolError."""
    out, _reports = open_reports()
    supervisor = Supervisor()
    with pytest.raises(LocalProtocolError, match="not running"):
        await supervisor.start_actor("a", Recorder(out))
    async with running(supervisor):
        pass
    with pytest.raises(LocalProtocolError, match="not running"):
        await supervisor.start_actor("a", Recorder(out))
    with pytest.raises(LocalProtocolError, match="already been run"):
        await supervisor.run()


async def test_cancelling_the_supervisor_stops_every_actor(autojump_clock: MockClock) -> None:
    """When run() is cancelled, every actor is cancelled and reported STOPPED."""
    out, reports = open_reports()
    supervisor = Supervisor()
    async with running(supervisor) as sup:
        await sup.start_actor("a", Recorder(out))
        await sup.start_actor("b", Recorder(out))
    assert [(h.name, h.state) for h in supervisor.statistics()] == [
        ("a", ActorState.STOPPED),
        ("b", ActorState.STOPPED),
    ]
    seen = [reports.receive_nowait() for _ in range(4)]
    assert sorted(seen) == [
        ("a", "cancelled", 0.0),
        ("a", "start", 0.0),
        ("b", "cancelled", 0.0),
        ("b", "start", 0.0),
    ]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Supervisor(heartbeat=0.0), "heartbeat"),
        (lambda: Supervisor(max_restarts=-1), "max_restarts"),
        (lambda: Supervisor(window=0.0), "window"),
        (lambda: Supervisor(backoff_initial=3.0, backoff_max=2.0), "backoff"),
    ],
)
def test_nonsense_settings_are_refused(make: Callable[[], Supervisor], message: str) -> None:
    """A supervisor refuses settings that could never work, naming the bad one."""
    with pytest.raises(ValueError, match=message):
        make()
