"""The ration of self-initiated messages: a rolling window per recipient, and a reason for each."""

from __future__ import annotations

import pytest

from crosstalk.core.ration import Ration, RationCheck
from crosstalk.errors import LocalProtocolError, NeedsReason, RationSpent

WHY = "your branch touches the file I am migrating"


def _spend_five(ration: Ration, start: float = 1000.0, step: float = 60.0) -> None:
    for i in range(5):
        ration.spend("marie", WHY, start + i * step)


def test_five_an_hour_are_allowed_and_the_sixth_says_when_one_frees() -> None:
    """Five sends at t=1000..1240; at t=1300 none is left and one frees at 1000 + 3600."""
    ration = Ration()
    assert ration.check("marie", 1000.0) == RationCheck(allowed=True, remaining=5)
    _spend_five(ration)
    assert ration.check("marie", 1300.0) == RationCheck(allowed=False, remaining=0, frees_at=4600.0)


def test_a_unit_frees_at_exactly_one_window_after_it_was_spent() -> None:
    """Just before t+3600 the ration is spent; at exactly t+3600 one unit is free again."""
    ration = Ration()
    _spend_five(ration)
    assert not ration.check("marie", 4599.999).allowed
    assert ration.check("marie", 4600.0) == RationCheck(allowed=True, remaining=1)
    ration.spend("marie", WHY, 4600.0)
    assert ration.check("marie", 4600.0).frees_at == 4660.0


def test_recipients_have_separate_rations() -> None:
    """Spending marie's ration leaves jo's untouched."""
    ration = Ration()
    _spend_five(ration)
    assert ration.check("jo", 1300.0) == RationCheck(allowed=True, remaining=5)


def test_a_spent_ration_refuses_with_ration_spent_and_records_nothing() -> None:
    """The sixth send raises ration_spent saying when the next frees, and is not counted."""
    ration = Ration()
    _spend_five(ration)
    with pytest.raises(RationSpent) as info:
        ration.spend("marie", WHY, 4000.0, label="Marie")
    assert info.value.code == "ration_spent"
    assert info.value.message == (
        "You have used all 5 self-initiated messages to Marie for this hour; "
        "the next one frees in 10 minutes."
    )
    assert ration.check("marie", 4600.0).remaining == 1


def test_the_wait_is_rounded_up_to_a_whole_minute() -> None:
    """Two seconds before a unit frees, the message says 1 minute, never 0."""
    ration = Ration()
    _spend_five(ration)
    with pytest.raises(RationSpent) as info:
        ration.spend("marie", WHY, 4598.0)
    assert info.value.message.endswith("the next one frees in 1 minute.")


@pytest.mark.parametrize("reason", [None, "", "   \n"])
def test_a_missing_or_blank_reason_needs_a_reason(reason: str | None) -> None:
    """No reason, or only blanks, is needs_reason and spends nothing."""
    ration = Ration()
    with pytest.raises(NeedsReason) as info:
        ration.spend("marie", reason, 0.0)
    assert info.value.code == "needs_reason"
    assert ration.check("marie", 0.0).remaining == 5


def test_the_reason_is_checked_before_the_ration() -> None:
    """With the ration spent and no reason, the error is needs_reason."""
    ration = Ration()
    _spend_five(ration)
    with pytest.raises(NeedsReason):
        ration.spend("marie", "", 1300.0)


def test_stamps_restore_the_same_ration() -> None:
    """A ration rebuilt from its persisted stamps gives the same answers."""
    ration = Ration()
    _spend_five(ration)
    restored = Ration(sent=ration.stamps())
    assert restored.stamps() == {"marie": [1000.0, 1060.0, 1120.0, 1180.0, 1240.0]}
    assert restored.check("marie", 1300.0) == ration.check("marie", 1300.0)


def test_a_stamp_from_the_future_frees_within_one_window() -> None:
    """After the clock moves back, a stamp later than now counts as sent now."""
    ration = Ration(per_window=1, sent={"marie": [90_000.0]})
    assert ration.check("marie", 1000.0) == RationCheck(allowed=False, remaining=0, frees_at=4600.0)


def test_a_custom_window_and_size_are_honoured() -> None:
    """Two per ten minutes: the third waits for the first to age out."""
    ration = Ration(per_window=2, window=600.0)
    ration.spend("marie", WHY, 0.0)
    ration.spend("marie", WHY, 100.0)
    assert ration.check("marie", 599.0).frees_at == 600.0
    assert ration.check("marie", 600.0).allowed


def test_forget_before_drops_only_aged_out_stamps() -> None:
    """Pruning keeps stamps still in the window and drops recipients with none."""
    ration = Ration()
    ration.spend("jo", WHY, 0.0)
    ration.spend("marie", WHY, 0.0)
    ration.spend("marie", WHY, 3000.0)
    ration.forget_before(3600.0)
    assert ration.stamps() == {"marie": [3000.0]}


@pytest.mark.parametrize(("per_window", "window"), [(0, 3600.0), (5, 0.0), (5, float("nan"))])
def test_a_ration_with_no_units_or_no_window_is_refused(per_window: int, window: float) -> None:
    """Constructing a ration that could never allow a send is a local protocol error."""
    with pytest.raises(LocalProtocolError):
        Ration(per_window=per_window, window=window)
