"""What the relay link's machines share: outbox rows, request frames, req numbers, delays, errors.

Nothing here has state worth a machine: pure functions (the backoff and retry delays, the relay's
``error`` frame as our error), the frozen :class:`OutboxItem`, and :class:`ReqNumbers`, the one
counter the boss owns and lends to every machine that sends a request, so a ``req`` is never
used twice on one link (a late reply to an expired request then matches nothing).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TypeVar

import attrs

from crosstalk.errors import (
    CrosstalkError,
    LocalProtocolError,
    NotAMember,
    NotInvited,
    RateLimited,
    SlotExpired,
    SlotNotFound,
    TooLarge,
    UnknownRoom,
)
from crosstalk.wire import relay as w

BACKOFF_BASE = 1.0
BACKOFF_CAP = 30.0
TRANSIENT_POST_ERRORS = frozenset({"rate_limited", "backlog_full"})
RESEAL_RETRY = 1.0
"""Seconds a room whose next post is sealed under an outdated epoch waits before asking again
to have it sealed anew (we hold no newer key yet: the rekey or share that brings it is coming)."""
LEAVE_FLUSH = 5.0
"""Seconds at most a leave waits for its room's queued posts to be taken (never more than half
its request's timeout): what was sent before leaving goes before the leave."""
REQUEST_FRAMES = (
    w.Create, w.Add, w.Accept, w.Decline, w.Leave, w.Remove, w.GetRoster, w.ListRooms,
    w.SlotOpen, w.SlotJoin, w.SlotAttach, w.SlotSend, w.SlotClose, w.WorkAsk,
)
RequestFrame = (
    w.Create | w.Add | w.Accept | w.Decline | w.Leave | w.Remove | w.GetRoster | w.ListRooms
    | w.SlotOpen | w.SlotJoin | w.SlotAttach | w.SlotSend | w.SlotClose | w.WorkAsk
)


@attrs.frozen
class OutboxItem:
    """One durable outbox row: ``id`` orders the flush. ``pinned``: the op carries keys (a
    rekey, a key share, a joiner naming itself), so it goes under the epoch it was sealed for
    (see :mod:`crosstalk.core.link.outbox`)."""

    id: int
    room: str
    op_id: str
    body: bytes
    pinned: bool = False


@attrs.frozen
class Resealed:
    """The answer to :class:`~crosstalk.core.link.events.ResealWanted`: ``item`` sealed anew under
    the room's newest epoch we hold; ``item=None`` when we hold none newer than its own yet;
    ``as_is`` for an op that carries keys (a rekey, a key share, a joiner naming itself), which
    must stay under the epoch its readers are sure to hold."""

    item: OutboxItem | None = None
    as_is: bool = False


class ReqNumbers:
    """The link's ``req`` counter: every request frame, resume and post takes the next one."""

    def __init__(self) -> None:
        self._next = 1

    def take(self) -> int:
        req, self._next = self._next, self._next + 1
        return req


def backoff_delay(attempt: int, fraction: float) -> float:
    """Seconds to wait before reconnect ``attempt`` (1 = the first retry after a failure).

    Jittered exponential: the ceiling doubles from 1 s per attempt up to 30 s, and the delay is
    between half the ceiling and the ceiling, ``ceiling * (0.5 + fraction / 2)``, so many daemons
    dropped at once by one relay restart do not all come back in the same instant.

    Args:
        attempt: how many connection attempts have failed since the link was last READY.
        fraction: a random number in [0, 1], drawn by the shell.
    """
    if attempt < 1:
        raise LocalProtocolError(f"backoff attempts count from 1, not {attempt}")
    if not 0.0 <= fraction <= 1.0:
        raise LocalProtocolError(f"the jitter fraction must be in [0, 1], not {fraction}")
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(attempt - 1, 16))
    return ceiling * (0.5 + 0.5 * fraction)


def post_retry_delay(failures: int) -> float:
    """Seconds a room's outbox pauses after ``failures`` transient refusals: 1, 2, 4 … 30."""
    return min(BACKOFF_CAP, BACKOFF_BASE * 2.0 ** min(max(failures, 1) - 1, 16))


_ERRORS: dict[str, type[CrosstalkError]] = {
    "slot_not_found": SlotNotFound, "slot_expired": SlotExpired, "rate_limited": RateLimited,
    "too_large": TooLarge, "unknown_room": UnknownRoom, "not_a_member": NotAMember,
    "not_invited": NotInvited,
}


def relay_error(frame: w.Error) -> CrosstalkError:
    """The relay's ``error`` frame as our error: the same stable code, the relay's sentence."""
    message = f"The relay refused this: {frame.message}"
    cls = _ERRORS.get(frame.code)
    return cls(message) if cls is not None else CrosstalkError(message, code=frame.code)


S = TypeVar("S", bound=enum.Enum)


def next_state(table: Mapping[S, Mapping[str, S]], state: S, happened: str, who: str) -> S:
    """Where ``happened`` leads from ``state`` in ``table``; an input the state does not take
    is our bug (h11 ``_state.py`` keeps its tables the same way).

    Raises:
        LocalProtocolError: ``state`` has no row for ``happened``.
    """
    nxt = table.get(state, {}).get(happened)
    if nxt is None:
        raise LocalProtocolError(f"the relay link's {who} cannot take {happened} while "
                                 f"{state.value}")
    return nxt
