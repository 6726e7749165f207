"""What an actor sees of its supervisor: a name, an inbox, and a way to prove it is alive.

An actor is any object with ``async def run(self, ctx, *, task_status)`` (the :class:`Actor`
protocol). The supervisor hands each *instance* of an actor a fresh :class:`ActorContext`; the
inbox inside it is the same channel for every instance, so messages sent while an actor is being
restarted wait for the next instance instead of being lost.

Liveness: an instance proves it is alive by calling ``ctx.beat()`` at least once per
``ctx.heartbeat`` seconds. Waiting in ``ctx.receive()`` (or ``async for msg in ctx``) counts as
beating for as long as it waits: an actor blocked on its own inbox has nothing to be stuck on, so
an idle actor is never restarted, and it costs no timer wake-ups. An actor that runs several tasks
(one reading a socket, one reading the inbox) should call ``ctx.inbox.receive()`` directly in the
second task, because a task idling in ``ctx.receive()`` vouches for the whole instance.

Each instance gets its own :class:`Liveness`, so a finished instance can never vouch for its
successor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar, runtime_checkable

import trio

from crosstalk.errors import CrosstalkError

T = TypeVar("T")


class Liveness:
    """When one actor instance last proved it was alive.

    Written by that instance's :class:`ActorContext`; read by the supervisor's watchdog.
    ``on_busy`` is called with the new beat deadline when the instance stops waiting on its
    inbox, so a watchdog that is sleeping past that deadline can wake up and re-arm.
    """

    def __init__(self, now: float, heartbeat: float, on_busy: Callable[[float], None]) -> None:
        self.last_beat = now
        self.heartbeat = heartbeat
        self._waiting = 0
        self._on_busy = on_busy

    def beat(self) -> None:
        """Record a proof of life at the current (virtual) time."""
        self.last_beat = trio.current_time()

    def deadline(self) -> float:
        """The time by which the next beat is due; infinite while waiting on the inbox."""
        if self._waiting:
            return math.inf
        return self.last_beat + self.heartbeat

    def age(self, now: float) -> float:
        """Seconds since the last beat; ``0.0`` while waiting on the inbox."""
        if self._waiting:
            return 0.0
        return now - self.last_beat

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Count the enclosed wait on the inbox as one long beat."""
        self._waiting += 1
        try:
            yield
        finally:
            self._waiting -= 1
            self.beat()
            if not self._waiting:
                self._on_busy(self.deadline())


@runtime_checkable
class Refusable(Protocol):
    """A message whose sender waits for an answer. ``refuse`` answers it with ``error`` when no
    instance will ever serve it (its actor FAILED); it must not block, and must be harmless if
    the message was answered already."""

    def refuse(self, error: CrosstalkError) -> None: ...


class ActorContext(Generic[T]):
    """One actor instance's view of its supervisor.

    Attributes:
        name: the name the actor was started under.
        inbox: the actor's inbox. It belongs to the supervisor and outlives this instance:
            receive from it, but never close it.
        heartbeat: seconds within which the instance must call :meth:`beat` (or be waiting
            in :meth:`receive`), or the watchdog cancels and restarts it.
    """

    def __init__(
        self,
        name: str,
        inbox: trio.MemoryReceiveChannel[T],
        liveness: Liveness,
    ) -> None:
        self._name = name
        self._inbox = inbox
        self._liveness = liveness

    @property
    def name(self) -> str:
        return self._name

    @property
    def inbox(self) -> trio.MemoryReceiveChannel[T]:
        return self._inbox

    @property
    def heartbeat(self) -> float:
        return self._liveness.heartbeat

    def beat(self) -> None:
        """Prove this instance is alive. Cheap: call it as often as you like."""
        self._liveness.beat()

    async def receive(self) -> T:
        """Wait for the next message in the inbox, beating while idle.

        Raises:
            trio.EndOfChannel: every send channel into the inbox was closed.
        """
        with self._liveness.waiting():
            return await self._inbox.receive()

    def __aiter__(self) -> ActorContext[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class Actor(Protocol[T]):
    """Anything the supervisor can run.

    ``run`` calls ``task_status.started()`` once it is ready to serve. Returning normally means
    the actor is done (it is not restarted); raising means it crashed (it is restarted, within
    the supervisor's restart-intensity limit).
    """

    async def run(
        self,
        ctx: ActorContext[T],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None: ...
