"""The relay link actor: the daemon's one WebSocket to its relay, kept alive and honest.

Shape: the rules live in :class:`~crosstalk.core.link.LinkBoss` (small sans-IO machines under
one boss). This actor runs, per instance:

* the *driver*, the only caller of the boss. Everything else posts to its one bounded input
  channel; the driver takes a whole batch at once (whatever queued while it was busy), feeds it
  to the boss, then carries out what the boss decided: commits, answers, events for the rest of
  the daemon, and frames for the current connection's writer. It wakes on its own at the boss's
  next deadline (request timeouts, paused rooms, the redial after a backoff, the handshake limit).
* no task of its own for commands: the inbox *is* the driver's input channel (``mailbox``, given
  to the supervisor as the inbox), so a request or a post reaches the driver with no hand-off
  between. A post arrives already committed to the outbox (``Committed``: the room that sealed
  it committed it, and its sender heard ``queued`` after that commit).
* the :class:`~crosstalk.actors.relay_socket.Dialer`: opens a connection when the boss says
  ``Dial``; per connection a reader (frames to the driver), the one writer, and a pinger.
* the :class:`~crosstalk.actors.relay_socket.Vouch`: beats only through waits that carry their
  own bound (connect, close, backoff).

The driver reads the inbox with ``receive()`` on ``ctx.inbox``, never ``ctx.receive()``: idling
there would vouch for the whole instance (see :mod:`crosstalk.actors.context`).

Durability (DESIGN.md §4): an inbound op and its cursor are committed in one transaction
(``relay_inbound`` + ``relay_cursors``), handed to the consumer, and only then acknowledged; an
outbox row becomes ``sent`` (with its seq) only on ``posted``. A post reaches the link only once
its outbox row is committed; a restart between that commit and the ``Committed`` command finds
the row in the outbox it loads (the boss ignores the command then: ``OutboxItem`` ids up to the
loaded ``outbox_through`` are known). The ``events`` channel is the fast
path; after a crash a consumer finds anything it missed in ``relay_inbound``.

Group commit: the ops among one batch of inputs (and any run of them among the boss's events)
are committed in one transaction: a burst, a resume or a busy room costs one fsync, not one per
op. Ops are committed and handed on strictly in seq order because one task does it all; a commit
is never cut short by a connection ending (the driver outlives connections).

Logging: INFO for ready, lost and pinning; WARNING for a refused relay key and for relay
complaints; DEBUG for each state transition.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable

import trio

from crosstalk import crypto
from crosstalk.actors.context import ActorContext
from crosstalk.actors.relay_link_api import (
    Committed,
    InboundOp,
    LinkCommand,
    LinkDown,
    LinkHistory,
    LinkOutput,
    LinkStatus,
    LinkTimings,
    LinkUp,
    OpRefused,
    OpSent,
    RelayPush,
    Request,
    RetryNow,
)
from crosstalk.actors.relay_link_driver import (
    INPUT_BUFFER,
    DriverInput,
    LinkDriver,
    Seen,
)
from crosstalk.actors.relay_link_store import LinkStore, SqliteLinkStore
from crosstalk.actors.relay_socket import (
    Connector,
    Dialer,
    RelaySocket,
    Vouch,
    open_relay_socket,
)
from crosstalk.core.link import LinkBoss, LinkState, OutboxItem, Resealed
from crosstalk.errors import LocalProtocolError
from crosstalk.store.db import Store

__all__ = [
    "Committed", "Connector", "InboundOp", "LinkCommand", "LinkDown", "LinkOutput", "LinkStatus",
    "LinkTimings", "LinkUp", "OpRefused", "OpSent", "RelayLink", "RelayPush", "RelaySocket",
    "Request", "RetryNow", "open_relay_socket",
]

log = logging.getLogger(__name__)

class RelayLink:
    """The relay-link actor (run it under the :class:`~crosstalk.actors.supervisor.Supervisor`).

    Args:
        url: the relay, ``ws://host:port`` or ``wss://…`` (``/ws`` is appended).
        keys: this identity's keys.
        device: this home's device id (see :func:`~crosstalk.actors.relay_link_store.device_id`).
        store: the daemon's :class:`Store` (or any :class:`LinkStore`, for tests).
        events: where committed inbound ops, post outcomes, pushes and up/down go, in order.
        timings: timeouts and intervals.
        connect: how to open a socket (tests pass an in-memory fake).
        fraction: draws the backoff jitter in [0, 1].
        reseal: seals a queued post anew under the room's newest epoch
            (crosstalk.actors.room_reseal); without it such a post goes as it is.
        posted: told ``(seconds, now)`` for each post from its commit to the outbox to the
            relay's ``posted`` answer (``crosstalk status``'s send -> posted).
        ring: rings the doorbell of a room whose actor runs, once its ops are recorded, and
            says whether it did; a room it did not ring hears of them through ``events``
            (``InboundOp``: the router starts its actor). Without it every op goes to ``events``.
    """

    def __init__(
        self,
        *,
        url: str,
        keys: crypto.Keys,
        device: str,
        store: Store | LinkStore,
        events: trio.MemorySendChannel[LinkOutput],
        timings: LinkTimings | None = None,
        connect: Connector = open_relay_socket,
        fraction: Callable[[], float] = random.random,
        reseal: Callable[[OutboxItem], Awaitable[Resealed]] | None = None,
        posted: Callable[[float, float], None] | None = None,
        ring: Callable[[str], bool] | None = None,
    ) -> None:
        self._url = url
        self._ring = ring
        self._posted = posted
        self._keys = keys
        self._device = device
        self._store: LinkStore = SqliteLinkStore(store) if isinstance(store, Store) else store
        self._events = events
        self._t = timings or LinkTimings()
        self._connect = connect
        self._fraction = fraction
        self._reseal = reseal
        self.history = LinkHistory()
        self._driver: LinkDriver | None = None
        # The inbox is the driver's one input channel: the commands senders put there and what
        # each instance's dialer reports share it, so a command reaches the driver with no task
        # in between. It outlives instances, as an inbox does; the driver drops what an earlier
        # instance's dialer left in it (``source``).
        self.mailbox = trio.open_memory_channel[DriverInput](INPUT_BUFFER)

    def statistics(self) -> LinkStatus:
        """Where the link stands (connected, last error, outbox depth)."""
        seen = self._driver.seen if self._driver is not None else Seen()
        history = self.history
        return LinkStatus(
            url=self._url,
            state=seen.state.value,
            connected=seen.state is LinkState.READY,
            last_error=seen.last_error,
            relay_key=seen.relay_key.hex() if seen.relay_key is not None else None,
            queued=seen.queued,
            attempts=seen.attempts,
            losses=history.losses,
            lost_ago_s=(
                None if history.lost_at is None
                else round(trio.current_time() - history.lost_at, 3)
            ),
            last_loss=history.reason,
            reconnect_s=None if history.reconnect_s is None else round(history.reconnect_s, 3),
        )

    async def run(
        self,
        ctx: ActorContext[DriverInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until cancelled (start it with ``channel=link.mailbox``)."""
        inputs, taken = self.mailbox
        if ctx.inbox is not taken:
            raise LocalProtocolError("start the relay link with channel=link.mailbox")
        snapshot = await self._store.load(self._url)
        boss = LinkBoss(
            keys=self._keys, device=self._device, url=self._url,
            pinned_key=snapshot.pinned_key, cursors=snapshot.cursors, outbox=snapshot.outbox,
            outbox_through=snapshot.outbox_through,
            handshake_timeout=self._t.connect_timeout,
        )
        t = self._t
        if t.ping_interval + t.ping_timeout >= ctx.heartbeat:
            log.warning(
                "relay link: ping interval + timeout (%g s) is not under the heartbeat (%g s)",
                t.ping_interval + t.ping_timeout, ctx.heartbeat,
            )
        dials, dialed = trio.open_memory_channel[None](1)
        vouch = Vouch(ctx.beat)
        dialer = Dialer(
            url=self._url, timings=t, connect=self._connect, inputs=inputs,
            vouch=vouch, beat=ctx.beat,
        )
        driver = self._driver = LinkDriver(
            boss=boss, url=self._url, store=self._store, events=self._events,
            request_timeout=t.request_timeout, fraction=self._fraction, vouch=vouch,
            dials=dials, history=self.history, reseal=self._reseal, posted=self._posted,
            source=dialer, ring=self._ring,
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dialer.run, dialed)
            nursery.start_soon(vouch.run, ctx.heartbeat)
            task_status.started()
            await driver.run(ctx.inbox)
