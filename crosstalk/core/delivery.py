"""How far one message we sent got, as its sender sees it: one machine for every kind.

Theory of operation
-------------------
A message, ask, answer, handoff or closing summary we post is in one :class:`DeliveryState`::

    QUEUED --posted--> SENT --delivered--> DELIVERED --read--> READ
       \\________________\\___________________\\_________________\\--refused--> REFUSED

* ``QUEUED``: committed to our outbox; the relay has not answered yet.
* ``SENT``: the relay sequenced it (its ``posted`` answer).
* ``DELIVERED``: a recipient's daemon holds it (their ``Receipt`` op, state ``delivered``).
* ``READ``: a recipient's agent or person read it (``Receipt`` state ``read``).
* ``REFUSED``: the relay refused the post for good (``by`` None), or a recipient's attention
  gate refused it (``by`` names them; their automatic ``refusal`` op says so). Always with a
  reason.

Who sends what: the relay link reports ``posted`` (and the relay's refusals), the recipients'
receipts and refusals arrive as room ops, in any order and possibly more than once: a receipt
may overtake the relay's answer (a fast reader), be posted twice (a receipts drain cut short),
or come after the refusal. So :func:`furthest` never moves a state backwards and never off
``REFUSED``: the state is the furthest one any true report proves, and a refusal, once known,
is final (a later ``read`` receipt for a refused handoff reports only that its refusal line was
seen). The first refusal heard keeps its ``by`` and ``reason``.

Invariants: every event is legal in every state (reports race each other), so the machine has
no error state; what a peer may send is checked at the edge (:func:`receipt_event` raises
``RemoteProtocolError`` for a receipt naming any other state). ``crosstalk sent``, the local
page and the ``send`` reply all read the state through this module (``store/messages.py``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

import attrs

from crosstalk.errors import LocalProtocolError, RemoteProtocolError


class DeliveryState(enum.Enum):
    """Where a message we sent stands; the values are what ``sent --json`` prints."""

    QUEUED = "queued"
    SENT = "sent"
    DELIVERED = "delivered"
    READ = "read"
    REFUSED = "refused"


class Step(enum.Enum):
    """Something that happened to a message we sent."""

    POSTED = "posted"  # the relay sequenced it
    DELIVERED = "delivered"  # a recipient's daemon holds it
    READ = "read"  # a recipient read it
    REFUSED = "refused"  # the relay, or a recipient's gate, refused it


@attrs.frozen
class Event:
    """One report about a message: ``step``, and for a refusal who refused it and why."""

    step: Step
    by: str | None = None  # who refused: a recipient's name, or None for the relay
    reason: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.step is Step.REFUSED and not self.reason:
            raise LocalProtocolError("a refusal must carry its reason")


@attrs.frozen
class Delivery:
    """A message's state; ``by`` and ``reason`` are set only when it is ``REFUSED``."""

    state: DeliveryState = DeliveryState.QUEUED
    by: str | None = None
    reason: str | None = None


def furthest(current: Delivery, event: Event) -> Delivery:
    """The state after ``event``: the further of the two, never back, never off refused.

    Args:
        current: the state so far.
        event: what was just reported.
    """
    if current.state is DeliveryState.REFUSED:
        return current
    if event.step is Step.REFUSED:
        return Delivery(DeliveryState.REFUSED, event.by, event.reason)
    proven = _PROVES[event.step]
    if _RANK[proven] > _RANK[current.state]:
        return Delivery(proven)
    return current


def settle(events: Iterable[Event], start: Delivery | None = None) -> Delivery:
    """Fold ``events`` in the order given over ``start`` (a new message by default)."""
    state = Delivery() if start is None else start
    for event in events:
        state = furthest(state, event)
    return state


def receipt_event(state: str) -> Event:
    """The event a recipient's ``Receipt`` op reports.

    Raises:
        RemoteProtocolError: the receipt names anything but ``delivered`` or ``read`` (a
            refusal is its own op; the states before delivery are ours to know).
    """
    step = _RECEIPTS.get(state)
    if step is None:
        raise RemoteProtocolError(f"a receipt cannot report {state!r}")
    return Event(step)


# --- the transition table ------------------------------------------------------------------------

#: The state each step proves (a receipt proves the relay took it, whatever it answered us).
_PROVES: dict[Step, DeliveryState] = {
    Step.POSTED: DeliveryState.SENT,
    Step.DELIVERED: DeliveryState.DELIVERED,
    Step.READ: DeliveryState.READ,
}
#: How far along each state is; REFUSED is past every other (terminal).
_RANK: dict[DeliveryState, int] = {state: i for i, state in enumerate(DeliveryState)}
_RECEIPTS: dict[str, Step] = {"delivered": Step.DELIVERED, "read": Step.READ}
