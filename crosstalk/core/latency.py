"""Latency over the last hour, in bounded memory: what ``crosstalk status`` shows as p50 and p99.

Theory of operation
-------------------
A :class:`LatencyWindow` keeps one fixed histogram per minute (``slot`` seconds) for the last
``window`` seconds: 60 slots of :data:`BUCKETS` counts at most, however many observations, so a
daemon that sends all day holds a few kilobytes. Inputs are :meth:`LatencyWindow.observe`
``(seconds, now)``; :meth:`LatencyWindow.summary` ``(now)`` merges the slots still inside the
window and reads the quantiles off the merged counts. ``now`` is any monotonic clock in seconds
(the shell passes ``trio.current_time()``): no clock is read here.

Accuracy: buckets grow by a factor of 1.25 from 0.1 ms, so a quantile is the upper bound of its
bucket, at most 25 % above the true value, and never outside the smallest and largest values
seen in the window (a single observation reads back exactly). Slots are whole minutes, so the
window is between ``window - slot`` and ``window`` seconds long as minutes turn over.

:class:`DaemonLatency` is the daemon's two windows: send → posted (an op committed to the
outbox until the relay's ``posted`` reply) and hook requests (the control op ``hook_event``
from request to reply).
"""

from __future__ import annotations

import bisect
import math
from collections import deque

import attrs

WINDOW = 3600.0
"""Seconds of history a summary covers."""
SLOT = 60.0
"""Seconds per histogram slot."""
BUCKETS: tuple[float, ...] = tuple(0.0001 * 1.25**k for k in range(72))
"""Upper bounds in seconds: 0.1 ms growing by a quarter up to about 900 s; beyond, overflow."""


@attrs.frozen
class LatencySummary:
    """The window's observations: how many, and the median and 99th percentile (None when
    there were none), in seconds."""

    count: int
    p50_s: float | None
    p99_s: float | None


@attrs.define
class _Slot:
    index: int  # floor(now / slot)
    counts: list[int]
    low: float
    high: float


class LatencyWindow:
    """Per-slot histograms over a sliding window (see the module docstring).

    Args:
        window: seconds a summary covers.
        slot: seconds per slot (a divisor of ``window`` reads best).
    """

    def __init__(self, *, window: float = WINDOW, slot: float = SLOT) -> None:
        if not (slot > 0 and window >= slot):
            raise ValueError(f"need 0 < slot <= window, not slot={slot!r}, window={window!r}")
        self.window = window
        self._slot = slot
        self._kept = max(1, math.ceil(window / slot))  # slots inside the window
        self._slots: deque[_Slot] = deque()

    def observe(self, seconds: float, now: float) -> None:
        """One observation of ``seconds`` (negative ones, from a clock that stepped, are 0)."""
        seconds = max(0.0, seconds)
        index = math.floor(now / self._slot)
        last = self._slots[-1] if self._slots else None
        if last is None or last.index < index:
            last = _Slot(index, [0] * (len(BUCKETS) + 1), seconds, seconds)
            self._slots.append(last)
            self._prune(index)
        # (A ``now`` before the newest slot's, which a monotonic clock never gives, lands in it.)
        last.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        last.low = min(last.low, seconds)
        last.high = max(last.high, seconds)

    def summary(self, now: float) -> LatencySummary:
        """Count, p50 and p99 of the observations in the window ending at ``now``."""
        self._prune(math.floor(now / self._slot))
        if not self._slots:
            return LatencySummary(0, None, None)
        merged = [sum(column) for column in zip(*(s.counts for s in self._slots), strict=True)]
        low = min(s.low for s in self._slots)
        high = max(s.high for s in self._slots)
        count = sum(merged)
        return LatencySummary(
            count, _quantile(merged, count, 0.50, low, high),
            _quantile(merged, count, 0.99, low, high),
        )

    def _prune(self, index: int) -> None:
        while self._slots and self._slots[0].index <= index - self._kept:
            self._slots.popleft()


def _quantile(counts: list[int], total: int, q: float, low: float, high: float) -> float:
    rank = max(1, math.ceil(q * total))
    running = 0
    for i, count in enumerate(counts):
        running += count
        if running >= rank:
            bound = BUCKETS[i] if i < len(BUCKETS) else high
            return min(max(bound, low), high)
    return high  # unreachable: the counts sum to total


@attrs.define
class DaemonLatency:
    """The daemon's latency windows, for ``status``."""

    send_posted: LatencyWindow = attrs.Factory(LatencyWindow)
    hook: LatencyWindow = attrs.Factory(LatencyWindow)
