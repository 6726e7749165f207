"""LatencyWindow: p50/p99 over the last hour in per-minute slots, under a clock that is a number."""

from __future__ import annotations

import pytest

from crosstalk.core.latency import BUCKETS, LatencySummary, LatencyWindow


def test_an_empty_window_has_no_quantiles() -> None:
    """Nothing observed: count 0, p50 and p99 None."""
    assert LatencyWindow().summary(100.0) == LatencySummary(0, None, None)


def test_a_single_observation_reads_back_exactly() -> None:
    """Quantiles are clamped to the values seen: one value is its own p50 and p99."""
    window = LatencyWindow()
    window.observe(0.0123, now=10.0)
    assert window.summary(11.0) == LatencySummary(1, 0.0123, 0.0123)


def test_quantiles_come_within_a_bucket_of_the_truth() -> None:
    """1..100 ms: p50 is about 50 ms and p99 about 99 ms, never low and at most 25 % high."""
    window = LatencyWindow()
    for ms in range(1, 101):
        window.observe(ms / 1000, now=float(ms))
    summary = window.summary(200.0)
    assert summary.count == 100
    assert summary.p50_s is not None and summary.p99_s is not None
    assert 0.050 <= summary.p50_s <= 0.050 * 1.25
    assert 0.099 <= summary.p99_s <= 0.100  # clamped to the largest seen


def test_observations_older_than_the_window_fall_out_by_the_minute() -> None:
    """A slow minute an hour ago no longer counts; the slot it was in is dropped."""
    window = LatencyWindow(window=3600.0, slot=60.0)
    window.observe(5.0, now=0.0)  # minute 0
    window.observe(0.010, now=1800.0)  # minute 30
    assert window.summary(3599.0).count == 2  # minute 59: both inside
    assert window.summary(3600.0) == LatencySummary(1, 0.010, 0.010)  # minute 60: minute 0 out
    assert window.summary(5400.0) == LatencySummary(0, None, None)


def test_memory_is_bounded_by_the_slots_in_the_window() -> None:
    """A day of one observation a second keeps at most 60 slots of fixed counts."""
    window = LatencyWindow()
    for second in range(86_400):
        window.observe(0.001 * (second % 50 + 1), now=float(second))
    assert len(window._slots) <= 60
    assert all(len(s.counts) == len(BUCKETS) + 1 for s in window._slots)
    assert window.summary(86_399.0).count == 3600  # the last 60 whole minutes, 60 a minute


def test_past_the_last_bucket_the_largest_value_is_the_answer() -> None:
    """A value beyond every bound (a 20-minute stall) is counted, and read back as itself."""
    window = LatencyWindow()
    window.observe(1200.0, now=0.0)
    assert window.summary(1.0) == LatencySummary(1, 1200.0, 1200.0)


def test_a_negative_duration_counts_as_zero() -> None:
    """A clock that stepped back cannot make a negative latency."""
    window = LatencyWindow()
    window.observe(-0.5, now=0.0)
    assert window.summary(0.0) == LatencySummary(1, 0.0, 0.0)


@pytest.mark.parametrize(("window", "slot"), [(60.0, 0.0), (30.0, 60.0), (60.0, -1.0)])
def test_a_slot_must_be_positive_and_fit_the_window(window: float, slot: float) -> None:
    """Nonsense sizes are refused at construction."""
    with pytest.raises(ValueError, match="slot"):
        LatencyWindow(window=window, slot=slot)
