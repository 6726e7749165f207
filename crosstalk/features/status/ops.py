"""``status`` and ``health``: who this daemon is, how its actors are, and what each feature
shows in ``status`` (its ``Plugs.status``, under its name in ``features``)."""

from __future__ import annotations

import os
from typing import Any, Protocol

import attrs
import trio

from crosstalk import __version__
from crosstalk.actors.supervisor import ActorHealth, LoopLag
from crosstalk.core.latency import LatencySummary, LatencyWindow
from crosstalk.features.caps import (
    Homed,
    Identified,
    Linked,
    Measured,
    ShowsStatus,
    Stored,
    Supervises,
)
from crosstalk.features.feature import Plugs, op
from crosstalk.store.sessions import list_sessions
from crosstalk.wire.control.params import NoParams
from crosstalk.wire.control.replies.daemon import ActorRow, HealthReply
from crosstalk.wire.control.table import HEALTH, STATUS


class Host(Stored, Identified, Linked, Supervises, Homed, ShowsStatus, Measured, Protocol):
    """What ``status`` and ``health`` read."""


@attrs.frozen
class RelayView:
    url: str | None
    connected: bool
    state: str
    last_error: str | None
    attempts: int = 0
    losses: int = 0
    lost_ago_s: float | None = None
    last_loss: str | None = None
    reconnect_s: float | None = None


@attrs.frozen
class LoopView:
    """How late the daemon's event loop has run (the supervisor's pulse): the worst since it
    started, when (Unix time: unlike an age, two answers agree), and the pulse's period, the
    measurement's resolution."""

    worst_lag_s: float
    worst_lag_at: float | None
    resolution_s: float

    @classmethod
    def from_lag(cls, lag: LoopLag) -> LoopView:
        at = None if lag.worst_wall is None else round(lag.worst_wall, 3)
        return cls(round(lag.worst_s, 3), at, round(lag.period_s, 3))


@attrs.frozen
class LatencyStat:
    """One latency over the window: how many, p50 and p99 in seconds (None with none)."""

    count: int
    p50_s: float | None
    p99_s: float | None

    @classmethod
    def of(cls, window: LatencyWindow, now: float) -> LatencyStat:
        summary: LatencySummary = window.summary(now)

        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 6)

        return cls(summary.count, rounded(summary.p50_s), rounded(summary.p99_s))


@attrs.frozen
class LatencyView:
    """p50/p99 over the last ``window_s`` seconds: ``send_posted`` from a message committed to
    the outbox to the relay's ``posted``; ``hook`` the control op ``hook_event``, request to
    reply."""

    window_s: float
    send_posted: LatencyStat
    hook: LatencyStat


@attrs.frozen
class OwnSession:
    name: str
    client: str
    project: str
    status: str
    last_seen: float


@attrs.frozen
class StatusReply:
    pid: int
    version: str
    home: str
    uptime_s: float
    label: str | None
    fingerprint: str | None
    relay: RelayView
    loop: LoopView
    latency: LatencyView
    sessions: list[OwnSession] = attrs.Factory(list)  # this identity's agent sessions here
    # What each feature shows, by feature name (an attrs value or JSON data per feature).
    features: dict[str, Any] = attrs.Factory(dict)


def actor_row(health: ActorHealth) -> ActorRow:
    """One actor's row in ``health`` (and ``doctor``), from the supervisor's statistics."""
    return ActorRow(
        name=health.name,
        state=health.state.name.lower(),
        restarts=health.restarts,
        last_error=health.last_error,
        beat_age_s=round(health.beat_age_s, 3),
        inbox=health.inbox,
    )


def plug(daemon: Host) -> Plugs:
    """The ``status`` and ``health`` ops."""

    async def status(_: NoParams) -> StatusReply:
        link = daemon.link_status()
        identity = daemon.identity
        own = [
            OwnSession(s.name, s.client, s.project, s.status.value, s.last_seen)
            for s in await daemon.store.read(list_sessions)
        ]
        return StatusReply(
            pid=os.getpid(),
            version=__version__,
            home=str(daemon.home.root),
            uptime_s=round(trio.current_time() - daemon.started_at, 3),
            label=identity.label if identity else None,
            fingerprint=daemon.keys.fingerprint if identity else None,
            relay=RelayView(
                url=link.url if link else None,
                connected=link.connected if link else False,
                state=link.state if link else "not started",
                last_error=link.last_error if link else None,
                attempts=link.attempts if link else 0,
                losses=link.losses if link else 0,
                lost_ago_s=link.lost_ago_s if link else None,
                last_loss=link.last_loss if link else None,
                reconnect_s=link.reconnect_s if link else None,
            ),
            loop=LoopView.from_lag(daemon.supervisor.loop_lag()),
            latency=_latency(daemon, trio.current_time()),
            sessions=own,
            features=await daemon.feature_status(),
        )

    async def health(_: NoParams) -> HealthReply:
        return HealthReply([actor_row(h) for h in daemon.supervisor.statistics()])

    return Plugs(ops=(op(STATUS, status), op(HEALTH, health)))


def _latency(daemon: Measured, now: float) -> LatencyView:
    windows = daemon.latency
    return LatencyView(
        window_s=windows.send_posted.window,
        send_posted=LatencyStat.of(windows.send_posted, now),
        hook=LatencyStat.of(windows.hook, now),
    )
