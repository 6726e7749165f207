"""The supervisor: one-for-one restarts, restart intensity, and a heartbeat watchdog.

Theory of operation.

* ``Supervisor.run()`` owns one nursery. In it run the watchdog task and one *guard* task per
  actor. A guard runs its actor's instances one after another, each inside the instance's own
  cancel scope, and catches whatever the instance raises. An actor's crash therefore never
  reaches the supervisor's nursery: the supervisor, the watchdog and every other actor keep
  running (trio >= 0.25 would otherwise deliver it as an ExceptionGroup that cancels them all).
* Each actor has an inbox (a bounded trio memory channel) created by ``start_actor``. The
  supervisor keeps the receive end for the actor's whole life and hands it to every instance, so
  messages sent while an actor is restarting are processed by the next instance. A message an
  instance had already taken when it crashed is gone: retrying it could crash it again forever.
* Each child spec says what a normal return means (:class:`Restart`, OTP's restart types). A
  ``PERMANENT`` actor (the default: the relay link, rooms, the gate…) is meant to run for the
  daemon's life, so its return is a fault: logged at ERROR and restarted exactly as a crash is.
  A ``TRANSIENT`` actor (a pairing) may finish: its return → STOPPED, never restarted. (An 8 s
  relay freeze once ended the relay link's instance normally; nothing restarted it and sends
  failed ``relay_unreachable`` until the daemon was restarted by hand.)
* Outcomes of an instance: a TRANSIENT one returns → STOPPED. It raises, the watchdog cancels
  it, or a PERMANENT one returns → the failure is logged and counted by
  :class:`RestartIntensity`; the next instance
  starts after an exponential backoff, or, beyond ``max_restarts`` restarts within ``window``
  seconds of ``trio.current_time()``, the actor is FAILED, logged at ERROR, and left alone. A
  FAILED actor's inbox stays open and is kept empty: a request waiting for an answer is refused
  at once with a sentence saying the actor failed (``Refusable``), anything else is dropped.
* ``stop_actor`` cancels the guard, waits for it to unwind, closes the inbox (senders then get
  ``trio.BrokenResourceError``) and forgets the name, which can then be started again.

Heartbeat bound (exact). An instance's start and every ``ctx.beat()`` are beats; waiting in
``ctx.receive()`` counts as beating throughout. If an instance last beat at virtual time ``b`` and
then neither beats nor waits on its inbox, the watchdog cancels it at exactly ``b + heartbeat``,
and, once it has unwound (at once, unless it shields itself from cancellation), the next instance
starts at exactly ``b + heartbeat + d``, where ``d`` is that restart's backoff. The watchdog does
not poll: it sleeps until the earliest beat deadline of all instances (and is woken when an
earlier one appears), so there is no polling slack on top of ``heartbeat``. Under the real clock,
add scheduling latency. One exception: if the event loop itself did not run for more than a
quarter heartbeat since the overdue beat (the process was stopped or the machine slept), no
instance could beat either, so instead of judging anyone the watchdog gives every instance a
fresh beat; a real hang is then caught one heartbeat later. A pulse task that ticks eight times a
heartbeat notices such a stall even when the watchdog itself wakes on time (the stop ended just
past its deadline, and the beats due in it were not run yet: an e2e test saw the control actor
restarted so, and its socket refused a connection).

Loop lag. The pulse also keeps the worst lateness of its own wakes (:class:`LoopLag`): how long
the event loop once ran nothing else, because something held it without yielding (one request
read and scanned a 400 MB slice for minutes). ``status`` and ``doctor`` show it.

Logging policy (STYLE rule 25): INFO for start, ready, restart, finish and stop; WARNING for a
missed heartbeat (degraded, not a bug); ERROR with the traceback for a crash and for FAILED, and
ERROR for a PERMANENT actor that returned (a bug: nothing else ends its loop).
"""

from __future__ import annotations

import enum
import functools
import logging
import math
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import trio

from crosstalk import sim_hooks
from crosstalk.actors.context import Actor, ActorContext, Liveness, Refusable
from crosstalk.actors.health import ActorHealth, ActorState, LoopLag
from crosstalk.actors.restarts import RestartIntensity
from crosstalk.errors import CrosstalkError, LocalProtocolError, StorageFull

__all__ = [
    "MISSED_HEARTBEAT",
    "RETURNED",
    "Actor",
    "ActorContext",
    "ActorHealth",
    "ActorState",
    "LoopLag",
    "Restart",
    "Supervisor",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

MISSED_HEARTBEAT = "missed heartbeat"
RETURNED = "returned, but it runs for the daemon's life"
# A loop that did not run for this long (as a fraction of the heartbeat) was stopped, with
# every actor in it.
SUSPENDED_FRACTION = 0.25
PULSE_FRACTION = SUSPENDED_FRACTION / 2  # the pulse's period, as a fraction of the heartbeat


class Restart(enum.Enum):
    """What an actor's normal return means, stated in its child spec (``start_actor``).

    ``PERMANENT``: it runs for the daemon's life; a return is a fault, restarted as a crash.
    ``TRANSIENT``: it may finish (a pairing ends with its outcome); a return stops it for good.
    Either is restarted when it raises or misses its heartbeat (OTP's ``permanent`` and
    ``transient``; ``temporary``, never restarted at all, has no user here).
    """

    PERMANENT = "permanent"
    TRANSIENT = "transient"


class _Child(Generic[T]):
    """The supervisor's record of one actor: everything that outlives its instances."""

    def __init__(
        self,
        name: str,
        actor: Actor[T],
        inbox: trio.MemoryReceiveChannel[T],
        intensity: RestartIntensity,
        restart: Restart,
    ) -> None:
        self.name = name
        self.actor = actor
        self.inbox = inbox
        self.intensity = intensity
        self.restart = restart
        self.state = ActorState.STARTING
        self.restarts = 0
        self.last_error: str | None = None
        self.last_exc: BaseException | None = None
        self.liveness: Liveness | None = None
        # Set only while an instance runs; the watchdog cancels it on a missed heartbeat.
        self.instance_scope: trio.CancelScope | None = None
        self.missed = False
        # Cancelled by stop_actor: ends the guard, whatever it is doing.
        self.guard_scope = trio.CancelScope()
        self.stopping = False
        self.ready = False
        self.done = trio.Event()

    def enter(self, state: ActorState, event: str) -> None:
        """Move to ``state`` because of ``event``, with one DEBUG trace line (STYLE rule 25)."""
        log.debug("actor %s[%s].%s -> [%s]", self.name, self.state.name, event, state.name)
        self.state = state

    def beat_deadline(self) -> float:
        """When the running instance's next beat is due; infinite if nothing is watched."""
        if self.instance_scope is None or self.missed or self.liveness is None:
            return math.inf
        return self.liveness.deadline()

    def health(self, now: float) -> ActorHealth:
        return ActorHealth(
            name=self.name,
            state=self.state,
            restarts=self.restarts,
            last_error=self.last_error,
            beat_age_s=0.0 if self.liveness is None else self.liveness.age(now),
            inbox=self.inbox.statistics().current_buffer_used,
        )


class _InstanceStatus(trio.TaskStatus[None]):
    """The ``task_status`` one instance gets: marks the actor RUNNING, tells the guard once."""

    def __init__(self, child: _Child[Any], on_ready: Callable[[], None]) -> None:
        self._child = child
        self._on_ready = on_ready
        self._called = False

    def started(self, value: None = None) -> None:
        if self._called:
            raise RuntimeError("called 'started' twice on the same task status")
        self._called = True
        child = self._child
        child.enter(ActorState.RUNNING, "started")
        if child.liveness is not None:
            child.liveness.beat()
        log.info("actor %s running (restarts: %d)", child.name, child.restarts)
        self._on_ready()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Supervisor:
    """Runs actors, restarts the ones that crash or freeze, and reports their health.

    Args:
        heartbeat: seconds within which a running instance must beat (or wait in
            ``ctx.receive()``) before the watchdog cancels and restarts it.
        max_restarts: restarts allowed within ``window`` seconds; one more failure marks
            the actor FAILED.
        window: seconds over which restarts are counted.
        backoff_initial: wait before the first restart in a window; doubles with each
            further recent restart.
        backoff_max: the cap on that wait.
        wall: reads the wall clock, to say when the worst loop lag was (:meth:`loop_lag`).
    """

    def __init__(
        self,
        *,
        heartbeat: float = 5.0,
        max_restarts: int = 5,
        window: float = 60.0,
        backoff_initial: float = 0.05,
        backoff_max: float = 2.0,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if not heartbeat > 0:
            raise ValueError(f"heartbeat must be > 0 seconds, not {heartbeat}")
        self._heartbeat = heartbeat
        # One fresh RestartIntensity per actor; building one now validates the arguments.
        self._new_intensity = functools.partial(
            RestartIntensity,
            max_restarts=max_restarts,
            window=window,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
        )
        self._new_intensity()
        self._children: dict[str, _Child[Any]] = {}
        self._nursery: trio.Nursery | None = None
        self._ran = False
        self._wakeup = trio.Event()
        self._watch_until = math.inf
        self._last_pulse = -math.inf  # the pulse's last tick
        self._stalled_at = -math.inf  # when the pulse last saw the loop had stood still
        self._worst_lag = 0.0  # the pulse's worst wake past its due time (LoopLag)
        self._worst_lag_at: float | None = None  # and when it was
        self._worst_lag_wall: float | None = None  # the same, by the wall clock
        self._wall = wall

    @property
    def heartbeat(self) -> float:
        return self._heartbeat

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the watchdog and every actor until cancelled. A supervisor runs once."""
        if self._ran:
            raise LocalProtocolError("this supervisor has already been run; make a new one")
        self._ran = True
        try:
            async with trio.open_nursery() as nursery:
                self._last_pulse = trio.current_time()
                nursery.start_soon(self._pulse)
                nursery.start_soon(self._watchdog)
                self._nursery = nursery
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None

    async def start_actor(
        self,
        name: str,
        actor: Actor[T],
        *,
        inbox_size: int = 16,
        restart: Restart = Restart.PERMANENT,
        channel: tuple[trio.MemorySendChannel[T], trio.MemoryReceiveChannel[T]] | None = None,
    ) -> trio.MemorySendChannel[T]:
        """Start supervising ``actor`` under ``name``.

        ``restart`` says whether a normal return ends the actor (``TRANSIENT``) or is a fault
        restarted like a crash (``PERMANENT``, the default: an actor that should run for the
        daemon's life and stops quietly would leave the daemon looking well while it is not).

        ``channel`` is an inbox opened before (a declared child's mailbox,
        crosstalk.actors.children); otherwise one of ``inbox_size`` is opened here.

        Returns once the first instance has called ``task_status.started()``, or once the
        actor has ended (STOPPED or FAILED) without getting there; ``statistics()`` tells which.

        Returns:
            The send end of the actor's inbox. Clone it for each sender; when every clone is
            closed, the actor's ``ctx.receive()`` raises ``trio.EndOfChannel``.

        Raises:
            LocalProtocolError: the supervisor is not running, or ``name`` is taken.
        """
        if self._nursery is None:
            raise LocalProtocolError("the supervisor is not running; start actors inside run()")
        if name in self._children:
            raise LocalProtocolError(f"an actor named {name!r} is already supervised")
        send, receive = channel or trio.open_memory_channel[T](inbox_size)
        child = _Child(name, actor, receive, self._new_intensity(), restart)
        self._children[name] = child
        log.info("actor %s starting", name)
        try:
            await self._nursery.start(self._guard, child)
        except BaseException:
            self._forget(child)
            raise
        return send

    async def stop_actor(self, name: str) -> bool:
        """Stop the actor called ``name``, close its inbox, and forget it.

        Waits until its current instance has unwound. Stopping an unknown name does nothing, so
        cleanup paths may call this twice.

        Returns:
            Whether there was such an actor.
        """
        child = self._children.get(name)
        if child is None:
            return False
        child.stopping = True
        child.guard_scope.cancel()
        await child.done.wait()
        self._forget(child)
        log.info("actor %s stopped", name)
        return True

    def health(self, name: str) -> ActorHealth | None:
        """The health of the actor called ``name``; None when no such actor is supervised."""
        child = self._children.get(name)
        return None if child is None else child.health(trio.current_time())

    def loop_lag(self) -> LoopLag:
        """The worst lateness of the pulse so far: how long the event loop once ran nothing."""
        return LoopLag(
            self._worst_lag,
            self._worst_lag_at,
            self._heartbeat * PULSE_FRACTION,
            self._worst_lag_wall,
        )

    def statistics(self) -> list[ActorHealth]:
        """The health of every actor, in the order they were started."""
        now = trio.current_time()
        return [child.health(now) for child in self._children.values()]

    # -- guards -----------------------------------------------------------------------------

    async def _guard(self, child: _Child[Any], *, task_status: trio.TaskStatus[None]) -> None:
        def report_ready() -> None:
            if not child.ready:
                child.ready = True
                task_status.started()

        try:
            with child.guard_scope:
                await self._supervise(child, report_ready)
                if child.state is ActorState.FAILED:
                    report_ready()
                    await _refuse_while_failed(child)
            # Ended (returned, FAILED, or stopped) before ever being ready: free start_actor.
            report_ready()
        finally:
            if child.state not in (ActorState.FAILED, ActorState.STOPPED):
                child.enter(ActorState.STOPPED, "stopped")
            child.done.set()
            if child.stopping:
                # The actor may have stopped itself, cancelling its own stop_actor call.
                self._forget(child)

    async def _supervise(self, child: _Child[Any], report_ready: Callable[[], None]) -> None:
        while True:
            if await self._run_instance(child, report_ready):
                event = "missed_heartbeat" if child.missed else "crashed"
            elif self._return_ends(child):
                child.enter(ActorState.STOPPED, "returned")
                log.info("actor %s finished", child.name)
                return
            else:
                event = "returned"
                child.last_error, child.last_exc = RETURNED, None
                log.error(
                    "actor %s returned, but it is meant to run for the daemon's life; "
                    "restarting it as a crash",
                    child.name,
                )
            delay = child.intensity.failed(trio.current_time())
            if delay is None and _out_of_storage(child.last_exc):
                # A full or failing disk is the machine's state, not the actor's bug: retry,
                # slowly, until writes succeed again (FAILED would stay failed after that).
                delay = child.intensity.backoff_max
                sim_hooks.probe("supervisor.storage_retry")
            if delay is None:
                child.enter(ActorState.FAILED, event)
                log.error(
                    "actor %s FAILED: more than %d restarts within %g s; not restarting it"
                    " (last error: %s)",
                    child.name,
                    child.intensity.max_restarts,
                    child.intensity.window,
                    child.last_error,
                    exc_info=child.last_exc,
                )
                return
            child.restarts += 1
            child.enter(ActorState.RESTARTING, event)
            log.info(
                "actor %s restarting in %.3f s (restart %d)", child.name, delay, child.restarts
            )
            await trio.sleep(delay)

    @staticmethod
    def _return_ends(child: _Child[Any]) -> bool:
        """Whether an instance's normal return ends its actor: only a TRANSIENT one's does."""
        return child.restart is Restart.TRANSIENT

    async def _run_instance(self, child: _Child[Any], report_ready: Callable[[], None]) -> bool:
        """Run one instance to its end. Returns whether it failed (crash or missed heartbeat)."""
        liveness = Liveness(trio.current_time(), self._heartbeat, self._rearm)
        ctx = ActorContext(child.name, child.inbox, liveness)
        child.liveness, child.missed = liveness, False
        child.enter(ActorState.STARTING, "instance_started")
        scope = child.instance_scope = trio.CancelScope()
        self._rearm(liveness.deadline())
        error: Exception | None = None
        try:
            with scope:
                await child.actor.run(ctx, task_status=_InstanceStatus(child, report_ready))
        except Exception as exc:
            # The whole point of a guard: contain this actor's crash, log it, let the caller
            # decide on a restart. Cancelled and KeyboardInterrupt are BaseExceptions and pass.
            error = exc
            log.error("actor %s crashed", child.name, exc_info=exc)
        finally:
            child.instance_scope = None
        if child.missed:
            child.last_error, child.last_exc = MISSED_HEARTBEAT, error
            return True
        if error is not None:
            child.last_error, child.last_exc = _describe(error), error
            return True
        return False

    # -- watchdog ---------------------------------------------------------------------------

    async def _watchdog(self) -> None:
        """Sleep until the earliest beat deadline; cancel every instance that is overdue."""
        while True:
            self._wakeup = trio.Event()
            self._watch_until = min(
                (child.beat_deadline() for child in self._children.values()), default=math.inf
            )
            with trio.move_on_at(self._watch_until):
                await self._wakeup.wait()
            now = trio.current_time()
            stood_still = self._stood_still(now)
            if stood_still is not None:
                self._excuse_everyone(stood_still)
                continue
            for child in list(self._children.values()):
                # Same float expression as the deadline slept on, so no rounding gap.
                if now >= child.beat_deadline():
                    self._miss(child, now)

    async def _pulse(self) -> None:
        """Tick every ``PULSE_FRACTION`` of a heartbeat; a tick far later than asked means the
        loop stood still meanwhile, and is noted for the watchdog."""
        period = self._heartbeat * PULSE_FRACTION
        while True:
            due = trio.current_time() + period
            await trio.sleep_until(due)
            now = trio.current_time()
            self._lagged(now - due, now)
            if now - self._last_pulse - period > self._heartbeat * SUSPENDED_FRACTION:
                self._stalled_at = now
            self._last_pulse = now

    def _lagged(self, lag: float, now: float) -> None:
        """The pulse woke ``lag`` seconds past its due time, at ``now``: keep the worst."""
        if lag > self._worst_lag:
            self._worst_lag, self._worst_lag_at, self._worst_lag_wall = lag, now, self._wall()

    def _stood_still(self, now: float) -> float | None:
        """How long the loop stood still, if it did for more than a quarter heartbeat since the
        beat now overdue (a heartbeat before the deadline the watchdog slept until)."""
        limit = self._heartbeat * SUSPENDED_FRACTION
        unseen = now - self._last_pulse - self._heartbeat * PULSE_FRACTION  # past the pulse's due
        if unseen > limit:
            return unseen
        if self._stalled_at > self._watch_until - self._heartbeat:
            return limit  # the pulse saw it first, and has ticked since
        return None

    def _excuse_everyone(self, stood_still: float) -> None:
        """The loop did not run for a while, so the whole process was not running (SIGSTOP, a
        suspended VM, a laptop lid): no instance could beat either. Judging them now would
        restart every busy actor at once; each gets a fresh heartbeat instead, and the ones
        that really hang are caught one heartbeat later. The stall is used up: the pulse does
        not report it again."""
        log.info("the daemon did not run for %.1f s or more; every actor gets a fresh heartbeat",
                 stood_still)
        now = trio.current_time()
        self._last_pulse, self._stalled_at = max(self._last_pulse, now), -math.inf
        for child in self._children.values():
            if child.liveness is not None:
                child.liveness.beat()

    def _rearm(self, deadline: float) -> None:
        """A new beat deadline exists; wake the watchdog if it sleeps past it."""
        if deadline < self._watch_until:
            self._wakeup.set()

    def _miss(self, child: _Child[Any], now: float) -> None:
        assert child.liveness is not None and child.instance_scope is not None
        child.missed = True
        log.warning(
            "actor %s missed its heartbeat (last beat %.3f s ago); cancelling it",
            child.name,
            child.liveness.age(now),
        )
        child.instance_scope.cancel()

    # -- helpers ----------------------------------------------------------------------------

    def _forget(self, child: _Child[Any]) -> None:
        if self._children.get(child.name) is child:
            del self._children[child.name]
        child.inbox.close()


async def _refuse_while_failed(child: _Child[Any]) -> None:
    """Answer what is sent to a FAILED actor at once, and keep its inbox empty: a request that
    waits for an answer (:class:`~crosstalk.actors.context.Refusable`) gets an error saying
    so, where it used to wait until its client gave up; anything else is dropped, as no
    instance would take it."""
    error = CrosstalkError(
        f"The daemon's {child.name} actor has stopped after repeated failures "
        f"({child.last_error}); `crosstalk doctor` shows it, and restarting the daemon "
        "starts it again. Nothing was done."
    )
    async for item in child.inbox:
        if isinstance(item, Refusable):
            item.refuse(error)


def _out_of_storage(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception inside its group) says the disk refused a write."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.subgroup(StorageFull) is not None
    return isinstance(exc, StorageFull)
