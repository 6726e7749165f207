"""What the relay link's boss tells its shell (drained with ``LinkBoss.events_received``).

Two kinds. Things that happened, which the shell carries out in order (commit, then tell the
rest of the daemon): :class:`OpArrived`, :class:`PostAccepted`, :class:`RoomJoined` and the
rest. And two orders about the socket, which only the shell can carry out: :class:`Dial` (open a
connection now) and :class:`Drop` (close the current one, for ``reason``).
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from crosstalk.core.link.common import OutboxItem
from crosstalk.errors import CrosstalkError
from crosstalk.wire import relay as w


@attrs.frozen
class Dial:
    """Open a connection to the relay now; report ``connected`` or ``connection_lost``."""


@attrs.frozen
class Drop:
    """Close the current connection; ``connection_lost(reason)`` follows once it is closed.

    ``refused_key`` says the relay showed a key other than the pinned one (worth a warning).
    """

    reason: str
    refused_key: bool = False


@attrs.frozen
class RelayKeySeen:
    """First use of this URL: pin ``relay_key`` durably, then call ``relay_key_pinned``."""

    relay_key: bytes


@attrs.frozen
class LinkReady:
    """Authenticated and resumed. ``missing`` rooms are gone (their cursors were dropped)."""

    relay_key: bytes
    rooms: list[w.ResumedRoom]
    missing: list[str]


@attrs.frozen
class LinkLost:
    """The connection (or the attempt) ended; the next ``Dial`` comes ``retry_in`` s later."""

    reason: str
    retry_in: float


@attrs.frozen
class OpArrived:
    """A new op: commit it with its cursor, then call ``op_committed(room, seq)``."""

    op: w.Op


@attrs.frozen
class PostAccepted:
    item: OutboxItem
    seq: int
    ts: float = 0.0  # the relay's time for it (reservations lapse by it on every replica)


@attrs.frozen(eq=False)
class PostRejected:
    """The relay will never take this item; it leaves the outbox."""

    item: OutboxItem
    error: CrosstalkError


@attrs.frozen
class ResealWanted:
    """The room's next post is sealed under an epoch older than one the room has moved to:
    seal it anew under our newest key, then call ``resealed`` (see the outbox's docstring)."""

    item: OutboxItem


@attrs.frozen
class RoomJoined:
    """We created or accepted ``room``: give it a durable cursor (0) so it is resumed."""

    room: str


@attrs.frozen
class RoomLeft:
    """``room`` is no longer ours: drop its durable cursor."""

    room: str


@attrs.frozen
class ReplyArrived:
    token: Hashable
    frame: w.RelayFrame


@attrs.frozen(eq=False)
class RequestFailed:
    token: Hashable
    error: CrosstalkError


@attrs.frozen
class PushArrived:
    """roster, invited, room_gone, presence, slot_joined, slot_msg or slot_closed (a roster
    that answers a request too, ahead of its answer)."""

    frame: w.RelayFrame


@attrs.frozen
class RelayComplained:
    """An ``error`` frame that answers no request (e.g. about an ``ack``)."""

    code: str
    message: str


LinkEvent = (
    Dial | Drop | RelayKeySeen | LinkReady | LinkLost | OpArrived | PostAccepted | PostRejected
    | ResealWanted | RoomJoined | RoomLeft | ReplyArrived | RequestFailed | PushArrived
    | RelayComplained
)
