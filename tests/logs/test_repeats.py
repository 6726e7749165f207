"""Repeats: a lasting condition is said once per change, then summarised; time is a number."""

from __future__ import annotations

import pytest

from crosstalk.logs import repeats_from_env
from crosstalk.logs.repeats import SUMMARY_EVERY, Repeats, Say


def _lines(repeats: Repeats, key: str, state: str, times: list[float]) -> list[tuple[float, Say]]:
    """Feed ``state`` at each of ``times``; the (time, Say) pairs a line was due at."""
    said = []
    for now in times:
        say = repeats.seen(key, state, now)
        if say is not None:
            said.append((now, say))
    return said


def test_a_condition_seen_every_second_for_a_day_is_said_once_then_hourly() -> None:
    """86,400 sightings a second apart: the first line, then one summary per hour (24 lines)."""
    repeats = Repeats(every=3600.0)
    said = _lines(repeats, "room-1", "not a member", [float(t) for t in range(86_400)])
    assert said[0] == (0.0, Say(first=True))
    assert [now for now, _ in said[1:]] == [3600.0 * h for h in range(1, 24)]
    assert all(say == Say(first=False, times=3600, over=3600.0) for _, say in said[1:])
    assert len(said) == 24


def test_a_changed_state_is_said_at_once_and_restarts_the_count() -> None:
    """A new reason for the same key is a first line, whenever it comes."""
    repeats = Repeats(every=100.0)
    assert repeats.seen("r", "refused", 0.0) == Say(first=True)
    assert repeats.seen("r", "refused", 1.0) is None
    assert repeats.seen("r", "timed out", 2.0) == Say(first=True)
    assert repeats.seen("r", "timed out", 50.0) is None
    assert repeats.seen("r", "timed out", 102.0) == Say(first=False, times=2, over=100.0)


def test_keys_are_counted_apart() -> None:
    """Two rooms failing alike each get their own first line and count."""
    repeats = Repeats(every=10.0)
    assert repeats.seen("a", "x", 0.0) == Say(first=True)
    assert repeats.seen("b", "x", 1.0) == Say(first=True)
    assert repeats.seen("a", "x", 5.0) is None
    assert repeats.seen("a", "x", 10.0) == Say(first=False, times=2, over=10.0)
    assert repeats.seen("b", "x", 10.0) is None


def test_cleared_counts_the_unsaid_and_makes_the_next_sighting_first() -> None:
    """After the condition ends, it is said in full again when it comes back."""
    repeats = Repeats(every=60.0)
    repeats.seen("r", "down", 0.0)
    repeats.seen("r", "down", 1.0)
    repeats.seen("r", "down", 2.0)
    assert repeats.cleared("r") == 2
    assert repeats.cleared("r") is None
    assert repeats.holding("r") is None
    assert repeats.seen("r", "down", 3.0) == Say(first=True)


def test_the_keys_held_are_bounded_the_oldest_said_going_first() -> None:
    """Past ``keep`` keys the one said longest ago is forgotten (said in full if it returns)."""
    repeats = Repeats(every=60.0, keep=2)
    repeats.seen("a", "x", 0.0)
    repeats.seen("b", "x", 1.0)
    repeats.seen("c", "x", 2.0)
    assert repeats.holding("a") is None
    assert repeats.holding("b") == repeats.holding("c") == "x"
    assert repeats.seen("a", "x", 3.0) == Say(first=True)


def test_the_summary_note_says_still_and_how_often() -> None:
    """The note a shell appends: nothing on the first line, "still; N times" after."""
    assert Say(first=True).note == ""
    hourly = Say(first=False, times=3600, over=3600.0)
    assert hourly.note == " (still; 3600 times in the last 60 min)"
    assert Say(first=False, times=5, over=30.0).note == " (still; 5 times in the last 30 s)"
    assert Say(first=False, times=9, over=3 * 3600.0).note == " (still; 9 times in the last 3.0 h)"


@pytest.mark.parametrize("every", [0.0, -1.0, float("nan")])
def test_a_period_that_is_not_positive_is_refused(every: float) -> None:
    """``every`` must be positive: a zero period would say every sighting."""
    with pytest.raises(ValueError, match="positive"):
        Repeats(every=every)


@pytest.mark.parametrize(
    ("raw", "every"), [(None, SUMMARY_EVERY), ("5", 5.0), ("0.5", 0.5), ("nope", SUMMARY_EVERY),
                       ("0", SUMMARY_EVERY), ("-3", SUMMARY_EVERY), ("inf", SUMMARY_EVERY)],
)
def test_the_summary_period_comes_from_the_environment_or_the_default(
    raw: str | None, every: float
) -> None:
    """CROSSTALK_LOG_SUMMARY_EVERY: a positive number of seconds; anything else, an hour."""
    environ = {} if raw is None else {"CROSSTALK_LOG_SUMMARY_EVERY": raw}
    assert repeats_from_env(environ).every == every
