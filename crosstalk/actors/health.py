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
