"""What a feature is to the daemon: one frozen :class:`Feature` value per feature package.

A feature package exports ``FEATURE = Feature(name, plug)``. The daemon calls ``plug`` once, at
start-up, with its capabilities (:mod:`crosstalk.features.caps`; each feature types its ``plug``
with the narrow protocol it needs), and gets back a :class:`Plugs`: everything the feature adds,
listed in one place: its control ops, the appliers that run inside each room's transaction, the
scopes around them, the listeners told after commits, the actors it declares and what it shows
in ``status``. ``plug`` is a function rather than the lists themselves because handlers are bound
(with ``functools.partial``, never a closure) to the capabilities and to state the feature shares
between them (the gate's mailbox, the leases of ``read``): both exist only once there is a
daemon.

Schema migrations are not listed here: ``state.db`` has one linear ``user_version``, so its steps
stay one ordered list in :mod:`crosstalk.store.migrations`, each step naming its feature.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

# Types only: a feature package's __init__ imports this module, and actors import feature
# modules (the router, membership's inputs), so nothing here may import an actor at runtime.
if TYPE_CHECKING:
    import sqlite3

    from crosstalk.actors.children import ChildSpec, DynamicKind
    from crosstalk.actors.control import Handler, OpTable, StreamHandler
    from crosstalk.actors.fanout import Subscriber
    from crosstalk.actors.room import AppliedListener, Applier, ApplyScope
    from crosstalk.features.caps import Capabilities
    from crosstalk.wire.control.spec import OpSpec
    from crosstalk.wire.relay_log import ResumedRoom
    from crosstalk.wire.room_ops import RoomOp

P = TypeVar("P")

StartHook = Callable[[], Awaitable[None]]
"""Start-up work that is not an actor (memory's first probe of each room): the daemon awaits
each in FEATURES order, once every declared child is up."""
SentListener = Callable[[str, str, "RoomOp"], Awaitable[None]]
"""Told (room, op id, op) after one of our own ops is committed to the outbox."""
SentWriter = Callable[["sqlite3.Connection", str, str, "RoomOp"], None]
"""Writes (room, op id, op) in the transaction that commits one of our own ops to the outbox,
so what the feature keeps about it is durable with it, at no commit of its own; idempotent by
op id (a retried post writes again)."""
LinkUpListener = Callable[[list["ResumedRoom"]], Awaitable[None]]
"""Told, in the router, where each room stands at the relay each time the link is up again;
must not block (the router waits for it)."""
StatusRead = Callable[[], Awaitable[Any]]
"""Returns an attrs value (or plain JSON data) shown under the feature's name in ``status``."""


@attrs.frozen
class ControlOp:
    """One control-socket op: its spec in the one table and its handler (or stream)."""

    spec: OpSpec[Any]
    handler: Handler[Any] | None = None
    stream: StreamHandler[Any] | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def install(self, table: OpTable) -> None:
        """Add this op to ``table`` (names are unique there)."""
        if self.stream is not None:
            table.add_stream(self.spec, self.stream)
        else:
            assert self.handler is not None
            table.add(self.spec, self.handler)


def op(spec: OpSpec[P], handler: Handler[P]) -> ControlOp:
    """A request/reply op (its spec from :mod:`crosstalk.wire.control.table`)."""
    return ControlOp(spec, handler=handler)


def stream_op(spec: OpSpec[P], handler: StreamHandler[P]) -> ControlOp:
    """A streaming op: an async generator of reply records."""
    return ControlOp(spec, stream=handler)


@attrs.frozen
class Plugs:
    """Everything one feature adds to the daemon, each seam in the order it is listed."""

    ops: tuple[ControlOp, ...] = ()
    appliers: tuple[Applier, ...] = ()  # in each room's transaction, per op, in sequence order
    apply_scopes: tuple[ApplyScope, ...] = ()  # around each batch of appliers
    # Appliers that only take room keys: a room held for a missing key runs them on later ops.
    key_takers: tuple[Applier, ...] = ()
    # Told after each room commit through the fan-out actor: every batch in order (BLOCK) ...
    applied_listeners: tuple[AppliedListener, ...] = ()
    # ... or a nudge per batch of commits, after which they re-read the store (COALESCE).
    applied_subscribers: tuple[Subscriber, ...] = ()
    # Told after a message that crossed no relay is held (a post, a me/SESSION, an announcement).
    local_listeners: tuple[AppliedListener, ...] = ()
    sent_writers: tuple[SentWriter, ...] = ()  # in our own op's outbox transaction
    sent_listeners: tuple[SentListener, ...] = ()  # after it
    # The actors it runs for the daemon's life, started in this order after the daemon's own
    # (crosstalk.actors.children), and the kinds of actor it starts on demand.
    children: tuple[ChildSpec[Any], ...] = ()
    spawns: tuple[DynamicKind, ...] = ()
    start: tuple[StartHook, ...] = ()
    link_up_listeners: tuple[LinkUpListener, ...] = ()
    status: StatusRead | None = None


@attrs.frozen
class Feature:
    """A feature: its name (also its key in ``status``) and how it plugs into the daemon."""

    name: str
    plug: Callable[[Capabilities], Plugs]
