"""The attention record: who has been reaching you, and what is waiting.

Theory of operation
-------------------
Nothing is capped. The record exists so that when someone reaches you too often you can see it
and turn *their* dial down. The shell appends one :class:`AttentionEntry` per gate decision, and
one more when a held item later surfaces (same ``item`` id, decision ``NOTICE_NOW`` or
``DELIVER_NOW``, stamped with the surfacing time). :func:`summarize` reads the list:

* ``reached_last_hour``: entries whose decision interrupted (a notice or words, now) with
  ``now - window < ts <= now``. An entry exactly one window old is outside the hour.
* ``held``: items whose latest entry holds (waiting for idle, or a timed mute). This is why an
  entry carries its ``item`` id: a hold followed by a surfacing is no longer held.
* ``by_source``: ``reached_last_hour`` split by source, so the bars add up to the total.

:func:`render_attention` draws the human view: two summary lines, then one row per source, most
first (ties by name), names left-aligned in one column, counts right-aligned, and a bar of
``●`` scaled so the largest count gets :data:`BAR_WIDTH` dots and any non-zero count at least
one. Source names come from peers (their chosen label), so control characters are replaced
before they reach a terminal.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import attrs

from crosstalk.core.triage import Decision

BAR_WIDTH = 10
BAR = "●"
WINDOW = 3600.0
_LABEL_WIDTH = 13


@attrs.frozen
class AttentionEntry:
    """One gate decision, or one held item surfacing.

    Attributes:
        item: the message id (several entries share it when a held item surfaces later).
        source: the name to show for the sender.
        ts: when the decision was made (seconds, the shell's clock).
        decision: what the gate did.
    """

    item: str
    source: str
    ts: float
    decision: Decision


@attrs.frozen
class AttentionSummary:
    """What ``crosstalk attention --json`` reports."""

    reached_last_hour: int
    held: int
    by_source: dict[str, int]


def summarize(
    entries: Iterable[AttentionEntry], now: float, *, window: float = WINDOW
) -> AttentionSummary:
    """Aggregate the record at ``now``.

    Args:
        entries: the record, in the order the shell appended it.
        now: the current time on the same clock as the entries.
        window: how far back "the last hour" reaches.
    """
    by_source: Counter[str] = Counter()
    latest: dict[str, AttentionEntry] = {}
    for entry in entries:
        if entry.decision.interrupts and now - window < entry.ts <= now:
            by_source[entry.source] += 1
        last = latest.get(entry.item)
        if last is None or entry.ts >= last.ts:
            latest[entry.item] = entry
    held = sum(1 for entry in latest.values() if entry.decision.holds)
    return AttentionSummary(
        reached_last_hour=sum(by_source.values()), held=held, by_source=dict(by_source)
    )


def render_attention(summary: AttentionSummary) -> str:
    """The human view of ``crosstalk attention``, without a trailing newline."""
    lines = [
        f"  {'reached you':<{_LABEL_WIDTH}}{summary.reached_last_hour} in the last hour",
        f"  {'held':<{_LABEL_WIDTH}}{summary.held} waiting for you to go idle",
    ]
    rows = _chart(summary.by_source)
    if rows:
        lines.append("")
        lines.extend(rows)
    return "\n".join(lines)


def _chart(counts: Mapping[str, int]) -> list[str]:
    shown = sorted(
        ((_printable(name), count) for name, count in counts.items() if count > 0),
        key=lambda row: (-row[1], row[0]),
    )
    if not shown:
        return []
    largest = shown[0][1]
    name_width = max(_LABEL_WIDTH, *(len(name) for name, _ in shown))
    count_width = max(2, len(str(largest)))
    return [
        f"  {name:<{name_width}}{count:>{count_width + 2}}  {BAR * _bar_length(count, largest)}"
        for name, count in shown
    ]


def _bar_length(count: int, largest: int) -> int:
    """Scaled to the largest, rounded half up, never zero for a non-zero count."""
    return max(1, (count * BAR_WIDTH * 2 + largest) // (largest * 2))


def _printable(name: str) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in name) or "?"
