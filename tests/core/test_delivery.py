"""The sender's view of one message: queued -> sent -> delivered -> read, or refused.

Unit tests pin each transition; the property tests feed any sequence of relay answers, receipts
(duplicated, out of order) and refusals and check the state is the furthest true one.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.delivery import (
    Delivery,
    DeliveryState,
    Event,
    Step,
    furthest,
    receipt_event,
    settle,
)
from crosstalk.errors import RemoteProtocolError

QUEUED, SENT, DELIVERED, READ, REFUSED = (
    DeliveryState.QUEUED, DeliveryState.SENT, DeliveryState.DELIVERED, DeliveryState.READ,
    DeliveryState.REFUSED,
)
POSTED = Event(Step.POSTED)
GOT = Event(Step.DELIVERED)
SEEN = Event(Step.READ)


def refused(by: str | None = "ben", reason: str = "no handoffs") -> Event:
    return Event(Step.REFUSED, by=by, reason=reason)


def test_a_new_message_is_queued() -> None:
    """Nothing has happened yet: queued, nobody refused it."""
    assert Delivery() == Delivery(QUEUED, None, None)


@pytest.mark.parametrize(
    ("start", "event", "end"),
    [
        (QUEUED, POSTED, SENT),
        (QUEUED, GOT, DELIVERED),  # a receipt proves the relay took it, answer or not
        (QUEUED, SEEN, READ),
        (SENT, GOT, DELIVERED),
        (SENT, SEEN, READ),
        (DELIVERED, SEEN, READ),
        (DELIVERED, POSTED, DELIVERED),  # the relay's answer after the receipt: no step back
        (READ, GOT, READ),  # a late delivered receipt: read stays
        (READ, POSTED, READ),
        (SENT, POSTED, SENT),  # a retried post answered twice
    ],
)
def test_each_event_moves_the_state_only_forward(
    start: DeliveryState, event: Event, end: DeliveryState
) -> None:
    """Receipts and relay answers move the state to the furthest of the two, never back."""
    assert furthest(Delivery(start), event) == Delivery(end)


@pytest.mark.parametrize("start", [QUEUED, SENT, DELIVERED, READ])
def test_a_refusal_at_any_step_is_refused_with_who_and_why(start: DeliveryState) -> None:
    """The recipient's gate (or the relay) refused it: refused, naming who and why."""
    assert furthest(Delivery(start), refused()) == Delivery(REFUSED, "ben", "no handoffs")


@pytest.mark.parametrize("event", [POSTED, GOT, SEEN, refused("cy", "something else")])
def test_refused_is_terminal(event: Event) -> None:
    """Once refused, nothing moves it: not a late receipt, nor a second refusal."""
    done = Delivery(REFUSED, "ben", "no handoffs")
    assert furthest(done, event) == done


def test_a_refusal_without_a_reason_is_a_protocol_error() -> None:
    """Who refused may be unknown (the relay), but a refusal always says why."""
    with pytest.raises(Exception, match="reason"):
        Event(Step.REFUSED, by="ben")


@pytest.mark.parametrize(("text", "step"), [("delivered", Step.DELIVERED), ("read", Step.READ)])
def test_a_receipt_names_delivered_or_read(text: str, step: Step) -> None:
    """The two states a receipt op may carry."""
    assert receipt_event(text) == Event(step)


@pytest.mark.parametrize("text", ["refused", "sent", "queued", "READ", ""])
def test_any_other_receipt_state_is_the_peers_mistake(text: str) -> None:
    """A receipt cannot claim refused (a refusal is its own op) or any state before delivery."""
    with pytest.raises(RemoteProtocolError):
        receipt_event(text)


# --- property: the furthest true state, whatever the order -------------------------------------

REASONS = st.text(min_size=1, max_size=20)
EVENTS = st.one_of(
    st.just(POSTED),
    st.just(GOT),
    st.just(SEEN),
    st.builds(lambda by, why: Event(Step.REFUSED, by=by, reason=why),
              st.one_of(st.none(), st.sampled_from(["ben", "cy"])), REASONS),
)
RANK = [QUEUED, SENT, DELIVERED, READ, REFUSED]


def expected(events: list[Event]) -> Delivery:
    """The furthest true state, said plainly: any refusal wins (the first one heard), then
    read, then delivered, then the relay's answer."""
    refusals = [e for e in events if e.step is Step.REFUSED]
    if refusals:
        return Delivery(REFUSED, refusals[0].by, refusals[0].reason)
    steps = {e.step for e in events}
    for step, state in ((Step.READ, READ), (Step.DELIVERED, DELIVERED), (Step.POSTED, SENT)):
        if step in steps:
            return Delivery(state)
    return Delivery()


@given(st.lists(EVENTS, max_size=30))
def test_any_sequence_ends_at_the_furthest_true_state(events: list[Event]) -> None:
    """Duplicated, out of order, mixed with refusals: the state is the furthest true one."""
    assert settle(events) == expected(events)


@given(st.lists(EVENTS, max_size=30))
def test_nothing_ever_moves_backwards(events: list[Event]) -> None:
    """Along the way, each state is at or past the one before it."""
    state = Delivery()
    for event in events:
        after = furthest(state, event)
        assert RANK.index(after.state) >= RANK.index(state.state)
        if state.state is REFUSED:
            assert after == state
        state = after


@given(st.lists(st.sampled_from([POSTED, GOT, SEEN]), max_size=20), st.randoms())
def test_without_a_refusal_the_order_does_not_matter(events: list[Event], rnd: object) -> None:
    """Receipts and relay answers in any order settle to the same state."""
    shuffled = list(events)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]  # hypothesis's Random
    assert settle(shuffled) == settle(events)
