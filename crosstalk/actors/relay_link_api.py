"""What the relay-link actor takes and tells: its commands, its events, its status.

Commands arrive in the actor's inbox (:data:`LinkCommand`); every request carries its own
one-shot reply channel. Events leave, in order, on the channel given to the actor
(:data:`LinkOutput`). :class:`LinkStatus` is what ``crosstalk status`` and ``doctor`` show.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import attrs
import trio

from crosstalk.actors.health import ActorHealth, ActorState
from crosstalk.core.link import OutboxItem, RequestFrame
from crosstalk.errors import CrosstalkError
from crosstalk.wire import relay as w


@attrs.frozen
class LinkTimings:
    """Durations in float seconds. Keep ``ping_interval + ping_timeout`` under the heartbeat."""

    connect_timeout: float = 10.0
    disconnect_timeout: float = 2.0
    ping_interval: float = 2.0
    ping_timeout: float = 2.0
    send_timeout: float = 10.0
    request_timeout: float = 20.0


# --- inbox commands ----------------------------------------------------------------------------

# Written in the transaction that commits a post to the outbox, after the outbox row (the room's,
# crosstalk.actors.room_send): what the sender keeps about its own op (``sent``'s row, the page's
# words) is then durable with the post or not at all, with no commit of its own.
OutboxWrite = Callable[[sqlite3.Connection], None]


@attrs.frozen(eq=False)
class Committed:
    """Posts a room has committed to the outbox (its senders heard ``queued``): post each when
    its turn comes. ``at`` is when they were committed (trio's clock: send -> posted)."""

    items: tuple[OutboxItem, ...]
    at: float


@attrs.frozen(eq=False)
class Request:
    """A request frame (its ``req`` is replaced); ``reply`` (buffer >= 1) hears the answer.

    The answer is the relay's reply frame, or a CrosstalkError: the relay's refusal (same code),
    or ``RelayUnreachable`` when the link is not READY within ``timeout`` (default
    ``LinkTimings.request_timeout``) or the relay does not answer by then.
    """

    frame: RequestFrame
    reply: trio.MemorySendChannel[w.RelayFrame | CrosstalkError]
    timeout: float | None = None


@attrs.frozen
class RetryNow:
    """Skip what is left of the backoff: the relay is known to be back (we just restarted it)."""


LinkCommand = Committed | Request | RetryNow


# --- events for the rest of the daemon -----------------------------------------------------------


@attrs.frozen
class InboundOp:
    """An op committed here (and acknowledged right after this event was taken)."""

    room: str
    seq: int
    sender_fingerprint: str
    op_id: str
    body: bytes
    relay_ts: float


@attrs.frozen
class OpSent:
    """Our op was sequenced by the relay (delivery state ``sent``)."""

    room: str
    op_id: str
    seq: int


@attrs.frozen(eq=False)
class OpRefused:
    """The relay will never take this op (``too_large``, ``not_a_member`` …); it left the outbox."""

    room: str
    op_id: str
    error: CrosstalkError


@attrs.frozen
class RelayPush:
    """roster, invited, room_gone, presence, slot_joined, slot_msg or slot_closed."""

    frame: w.RelayFrame


@attrs.frozen
class LinkUp:
    url: str
    relay_key: bytes
    rooms: list[w.ResumedRoom]
    missing: list[str]


@attrs.frozen
class LinkDown:
    url: str
    reason: str


LinkOutput = InboundOp | OpSent | OpRefused | RelayPush | LinkUp | LinkDown


@attrs.frozen
class LinkStatus:
    """For ``crosstalk status`` and ``doctor``."""

    url: str
    state: str
    connected: bool
    last_error: str | None
    relay_key: str | None
    queued: int
    attempts: int
    losses: int = 0  # connections lost since the daemon started
    lost_ago_s: float | None = None  # how long ago the last one was lost
    last_loss: str | None = None  # why it was lost
    reconnect_s: float | None = None  # how long the last loss took to heal (None: not yet)


def while_running(status: LinkStatus, actor: ActorHealth | None) -> LinkStatus:
    """``status`` as long as the link's actor runs; otherwise not connected, in the actor's state.

    The status is the driver's last view of the boss, and a driver outlives nothing: once its
    instance has ended (returned, crashed, FAILED, stopped) or before the next one is up, that
    view is stale. A link whose instance once returned after a relay freeze kept showing
    ``connected`` while every send failed ``relay_unreachable``.
    """
    if actor is not None and actor.state is ActorState.RUNNING:
        return status
    state = actor.state.value if actor is not None else "stopped"
    error = actor.last_error if actor is not None else None
    return attrs.evolve(
        status,
        connected=False,
        state=f"link actor {state}",
        last_error=error or status.last_error or f"the link's actor is {state}",
    )


@attrs.define
class LinkHistory:
    """Losses and recoveries of the link, for ``doctor`` (trio time, seconds)."""

    losses: int = 0
    lost_at: float | None = None
    reason: str | None = None
    reconnect_s: float | None = None

    def lost(self, now: float, reason: str) -> None:
        if self.lost_at is None or self.reconnect_s is not None:  # a new outage begins
            self.lost_at, self.reconnect_s = now, None
        self.losses += 1
        self.reason = reason

    def ready(self, now: float) -> None:
        if self.lost_at is not None and self.reconnect_s is None:
            self.reconnect_s = now - self.lost_at
