"""RestartIntensity: the pure backoff and restart-limit rule (no clock, no trio)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.actors.restarts import RestartIntensity


def _intensity(max_restarts: int = 3, window: float = 10.0) -> RestartIntensity:
    return RestartIntensity(
        max_restarts=max_restarts, window=window, backoff_initial=0.5, backoff_max=1.5
    )


def test_backoff_doubles_then_is_capped() -> None:
    """Each recent restart doubles the backoff until it reaches backoff_max."""
    intensity = _intensity(max_restarts=5)
    assert [intensity.failed(0.0) for _ in range(5)] == [0.5, 1.0, 1.5, 1.5, 1.5]


def test_one_failure_more_than_max_restarts_inside_the_window_is_final() -> None:
    """max_restarts restarts are allowed inside the window; the next failure answers None."""
    intensity = _intensity(max_restarts=3)
    assert [intensity.failed(t) for t in (0.0, 1.0, 2.0)] == [0.5, 1.0, 1.5]
    assert intensity.failed(9.5) is None
    assert intensity.recent(9.5) == 3


def test_a_restart_exactly_window_seconds_old_no_longer_counts() -> None:
    """A restart leaves the window when it is window seconds old, and the backoff restarts."""
    intensity = _intensity(max_restarts=1)
    assert intensity.failed(0.0) == 0.5
    assert intensity.failed(9.999) is None
    assert intensity.failed(10.0) == 0.5
    assert intensity.recent(10.0) == 1


def test_zero_max_restarts_fails_on_the_first_failure() -> None:
    """With max_restarts=0 an actor is never restarted."""
    assert _intensity(max_restarts=0).failed(0.0) is None


def test_huge_restart_counts_do_not_overflow_the_backoff() -> None:
    """Thousands of recent restarts keep answering the cap instead of overflowing a float."""
    intensity = RestartIntensity(
        max_restarts=5000, window=10.0, backoff_initial=1.0, backoff_max=7.0
    )
    delays = [intensity.failed(0.0) for _ in range(5000)]
    assert delays[-1] == 7.0
    assert intensity.failed(0.0) is None


@given(
    times=st.lists(st.floats(min_value=0.0, max_value=1000.0), max_size=40).map(sorted),
    max_restarts=st.integers(min_value=0, max_value=6),
)
def test_never_more_than_max_restarts_inside_any_window(
    times: list[float], max_restarts: int
) -> None:
    """Whatever the failure times, granted restarts never exceed the limit in one window."""
    intensity = _intensity(max_restarts=max_restarts)
    granted = [t for t in times if intensity.failed(t) is not None]
    for t in granted:
        assert sum(1 for other in granted if t <= other < t + 10.0) <= max_restarts


def test_nonsense_settings_are_refused() -> None:
    """Negative limits, an empty window or backwards backoffs are refused."""
    with pytest.raises(ValueError, match="max_restarts"):
        RestartIntensity(max_restarts=-1, window=1.0, backoff_initial=0.0, backoff_max=0.0)
    with pytest.raises(ValueError, match="window"):
        RestartIntensity(max_restarts=1, window=0.0, backoff_initial=0.0, backoff_max=0.0)
    with pytest.raises(ValueError, match="backoff"):
        RestartIntensity(max_restarts=1, window=1.0, backoff_initial=-1.0, backoff_max=0.0)
