"""The attention record: counting who reached you, what is held, and the bar chart."""

from __future__ import annotations

from crosstalk.core.attention import (
    AttentionEntry,
    AttentionSummary,
    render_attention,
    summarize,
)
from crosstalk.core.triage import Decision

NOW = 10_000.0


def _entry(item: str, source: str, ts: float, decision: Decision) -> AttentionEntry:
    return AttentionEntry(item=item, source=source, ts=ts, decision=decision)


def test_only_interruptions_inside_the_last_hour_count_as_reaching_you() -> None:
    """Notices and words now count; an entry exactly an hour old or in the future does not."""
    entries = [
        _entry("a", "marie", NOW - 3600.0, Decision.NOTICE_NOW),
        _entry("b", "marie", NOW - 3599.5, Decision.NOTICE_NOW),
        _entry("c", "marie", NOW, Decision.DELIVER_NOW),
        _entry("d", "jo", NOW - 10.0, Decision.NOTICE_NOW),
        _entry("e", "jo", NOW - 10.0, Decision.DROP),
        _entry("f", "jo", NOW - 10.0, Decision.REFUSE),
        _entry("g", "jo", NOW - 10.0, Decision.RECORD_ONLY),
        _entry("h", "jo", NOW + 1.0, Decision.NOTICE_NOW),
    ]
    assert summarize(entries, NOW) == AttentionSummary(
        reached_last_hour=3, held=0, by_source={"marie": 2, "jo": 1}
    )


def test_held_counts_items_whose_latest_entry_still_holds() -> None:
    """A hold later surfaced is no longer held, and its surfacing counts as reaching you."""
    entries = [
        _entry("a", "marie", NOW - 100.0, Decision.NOTICE_WHEN_IDLE),
        _entry("b", "marie", NOW - 90.0, Decision.HOLD_QUIET),
        _entry("c", "ci", NOW - 80.0, Decision.DELIVER_WHEN_IDLE),
        _entry("a", "marie", NOW - 10.0, Decision.NOTICE_NOW),
    ]
    summary = summarize(entries, NOW)
    assert summary == AttentionSummary(reached_last_hour=1, held=2, by_source={"marie": 1})


def test_an_old_hold_still_counts_as_held() -> None:
    """Held is not limited to the last hour: a day-old hold is still waiting."""
    entries = [_entry("a", "jo", NOW - 86_400.0, Decision.NOTICE_WHEN_IDLE)]
    assert summarize(entries, NOW).held == 1


def test_a_custom_window_bounds_the_count() -> None:
    """With a ten-minute window only the last ten minutes count."""
    entries = [
        _entry("a", "jo", NOW - 700.0, Decision.NOTICE_NOW),
        _entry("b", "jo", NOW - 500.0, Decision.NOTICE_NOW),
    ]
    assert summarize(entries, NOW, window=600.0).reached_last_hour == 1


def test_the_chart_matches_the_documented_layout() -> None:
    """The seed's example renders exactly, bars scaled to the largest count."""
    summary = AttentionSummary(
        reached_last_hour=12, held=3, by_source={"jo": 2, "ci": 11, "marie": 18}
    )
    assert render_attention(summary) == (
        "  reached you  12 in the last hour\n"
        "  held         3 waiting for you to go idle\n"
        "\n"
        "  marie          18  ●●●●●●●●●●\n"
        "  ci             11  ●●●●●●\n"
        "  jo              2  ●"
    )


def test_an_empty_record_shows_only_the_two_totals() -> None:
    """With nobody in the record there is no chart, just the totals."""
    assert render_attention(AttentionSummary(reached_last_hour=0, held=0, by_source={})) == (
        "  reached you  0 in the last hour\n  held         0 waiting for you to go idle"
    )


def test_long_names_widen_the_column_and_ties_sort_by_name() -> None:
    """A name longer than the column widens it for every row; equal counts sort by name."""
    summary = AttentionSummary(
        reached_last_hour=6, held=0, by_source={"zed": 1, "a-very-long-robot": 1, "amy": 4}
    )
    assert render_attention(summary).split("\n")[3:] == [
        "  amy                 4  ●●●●●●●●●●",
        "  a-very-long-robot   1  ●●●",
        "  zed                 1  ●●●",
    ]


def test_bars_round_half_up_and_never_vanish() -> None:
    """1 of 20 is half a dot and shows one; 5 of 20 is 2.5 and shows three; 3 of 20 shows two."""
    summary = AttentionSummary(
        reached_last_hour=29, held=0, by_source={"a": 20, "b": 5, "c": 3, "d": 1}
    )
    bars = [line.rsplit("  ", 1)[1] for line in render_attention(summary).split("\n")[3:]]
    assert bars == ["●" * 10, "●" * 3, "●" * 2, "●"]


def test_control_characters_in_names_are_replaced() -> None:
    """A peer-chosen name cannot move the cursor or break lines in the terminal."""
    summary = AttentionSummary(reached_last_hour=1, held=0, by_source={"evil\x1b[2J\nx": 1})
    last = render_attention(summary).split("\n")[-1]
    assert last == "  evil?[2J?x      1  " + "●" * 10


def test_sources_with_zero_count_are_not_drawn() -> None:
    """A zero count gets no row."""
    summary = AttentionSummary(reached_last_hour=2, held=0, by_source={"jo": 2, "ci": 0})
    assert "ci" not in render_attention(summary)
