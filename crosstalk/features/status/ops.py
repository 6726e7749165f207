"""``status`` and ``health``: who this daemon is, how its actors are, and what each feature
shows in ``status`` (its ``Plugs.status``, under its name in ``features``)."""

from __future__ import annotations

import functools
import os
from typing import Protocol

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
from crosstalk.wire.control.replies.daemon import (
    ActorRow,
    HealthReply,
    LatencyStat,
    LatencyView,
    LoopView,
    OwnSession,
    RelayView,
    StatusReply,
)
from crosstalk.wire.control.table import HEALTH, STATUS


class Host(Stored, Identified, Linked, Supervises, Homed, ShowsStatus, Measured, Protocol):
    """What ``status`` and ``health`` read."""


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


async def status(daemon: Host, _: NoParams) -> StatusReply:
    """The ``status`` op: who we are, the relay link, the loop, latency, sessions, features."""
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
        loop=_loop_view(daemon.supervisor.loop_lag()),
        latency=_latency(daemon, trio.current_time()),
        sessions=own,
        features=await daemon.feature_status(),
    )


async def health(daemon: Host, _: NoParams) -> HealthReply:
    """The ``health`` op: every supervised actor's state."""
    return HealthReply([actor_row(h) for h in daemon.supervisor.statistics()])


def plug(daemon: Host) -> Plugs:
    """The ``status`` and ``health`` ops."""
    return Plugs(ops=(
        op(STATUS, functools.partial(status, daemon)),
        op(HEALTH, functools.partial(health, daemon)),
    ))


def _loop_view(lag: LoopLag) -> LoopView:
    at = None if lag.worst_wall is None else round(lag.worst_wall, 3)
    return LoopView(round(lag.worst_s, 3), at, round(lag.period_s, 3))


def _latency_stat(window: LatencyWindow, now: float) -> LatencyStat:
    summary: LatencySummary = window.summary(now)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    return LatencyStat(summary.count, rounded(summary.p50_s), rounded(summary.p99_s))


def _latency(daemon: Measured, now: float) -> LatencyView:
    windows = daemon.latency
    return LatencyView(
        window_s=windows.send_posted.window,
        send_posted=_latency_stat(windows.send_posted, now),
        hook=_latency_stat(windows.hook, now),
    )
