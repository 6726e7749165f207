"""Actor health as data: what ``crosstalk doctor`` and the control socket report.

The supervisor builds one :class:`ActorHealth` per actor on demand (``Supervisor.statistics()``);
nothing here does I/O or reads a clock, so the records can be compared, logged and sent over the
control socket as they are.
"""

from __future__ import annotations

import enum

import attrs


class ActorState(enum.Enum):
    """Where an actor is in its life.

    ``STARTING``: an instance is running but has not called ``task_status.started()`` yet.
    ``RUNNING``: the current instance said it is ready.
    ``RESTARTING``: the last instance crashed or missed its heartbeat; waiting out the backoff.
    ``FAILED``: it crashed more often than the restart-intensity limit allows; nothing runs it
    any more, but its inbox stays open so senders do not crash.
    ``STOPPED``: it returned normally, was stopped, or its supervisor shut down.
    """

    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


@attrs.frozen
class ActorHealth:
    """One actor's health at the moment ``statistics()`` was called.

    Attributes:
        name: the name the actor was started under.
        state: see :class:`ActorState`.
        restarts: how many times the supervisor has restarted it (crashes and missed
            heartbeats), over its whole life.
        last_error: one line describing the last crash (``"ValueError: ..."``) or
            ``"missed heartbeat"``; ``None`` if it never failed.
        beat_age_s: seconds since it last proved it was alive; ``0.0`` while it waits in
            ``ctx.receive()``, because waiting on its own inbox is proof enough.
        inbox: messages waiting in its inbox.
    """

    name: str
    state: ActorState
    restarts: int
    last_error: str | None
    beat_age_s: float
    inbox: int


@attrs.frozen
class LoopLag:
    """How late the event loop ran the supervisor's pulse: the worst since the daemon started.

    A pulse asked to wake at ``t`` and woken at ``t + lag`` waited ``lag`` for the loop, which
    was busy with something that did not yield (or the process was stopped). The pulse samples:
    a stall of ``d`` seconds shows as at least ``d`` minus the pulse's period, so every stall
    longer than a period is seen, shorter ones only when they span a tick.

    Attributes:
        worst_s: the worst lag seen, in seconds (0.0 until the loop is ever late).
        worst_at: when, in trio time; None while it has never been late.
        period_s: the pulse's period: the resolution of the measurement.
        worst_wall: when, as the wall clock (Unix time) read it then; None with ``worst_at``.
    """

    worst_s: float
    worst_at: float | None
    period_s: float
    worst_wall: float | None = None
