"""bench/page/goals41.py: issue 41's rows of the page's goal table, from hand-made results (met,
not met with its measured bound, and not measured)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.page import goals41
from bench.page.fmt import Result
from bench.page.goals import goals


def _results(runs: dict[str, Any]) -> Result:
    def result(name: str) -> dict[str, Any]:
        value: dict[str, Any] = runs[name]["result"]
        return value
    return result


def _one(build: Any, runs: dict[str, Any]) -> list[str]:
    """The builder's one row as the table shows it, under issue 41."""
    rows: list[list[str]] = build(_results(runs))
    assert len(rows) == 1
    return ["41", *rows[0]]


def _latency(p50: float, p99: float) -> dict[str, Any]:
    return {"latency": {"result": {
        "send_to_held": {"p50_ms": p50, "p99_ms": p99},
        "ws_echo_round_trip": {"p50_ms": 0.2, "p99_ms": 0.3},
        "fsync_4k": {"p50_ms": 0.1, "p99_ms": 2.5},
        "send_to_inbox_pushed": {"p50_ms": 2 * p50, "p99_ms": 2 * p99},
        "send_to_channel_pushed": {"p50_ms": 3 * p50, "p99_ms": 3 * p99},
    }}}


def test_a_tail_within_twice_the_median_is_met() -> None:
    row = _one(goals41.held_spread, _latency(5.0, 9.0))
    assert row[2] == "1.80× (9.0 ms ÷ 5.0 ms)" and row[-1] == "met"


def test_a_wider_tail_names_the_echo_s_tail_and_the_fsync_s() -> None:
    """p99 = 3× p50 against an echo whose p99 is 1.5× its own: wider than the machine's, with
    the fsync's tail from the same run."""
    row = _one(goals41.held_spread, _latency(5.0, 15.0))
    assert row[-1].startswith("not met: the tail is wider than the raw echo's (1.5× its p50)")
    assert "fsync's p99 was 2.5 ms against its p50 0.100 ms" in row[-1]


def test_the_pushes_are_measured_rows_beside_send_to_held() -> None:
    rows = goals41.pushes(_results(_latency(5.0, 9.0)))
    assert [r[0] for r in rows] == ["send → a busy session's inbox socket",
                                    "send → channel notification (MCP)"]
    assert rows[0][1] == "p50 10.0 ms, p99 18.0 ms"
    assert rows[0][-1] == "measured: p50 2.0× send → held's"
    assert rows[1][-1] == "measured: p50 3.0× send → held's"


def _members(build: float, p50: float, **big: float) -> dict[str, Any]:
    small = {"x": 2, "latency": {"p50_ms": 0.5}, "build_s": 0.03, "relay_cpu_per_post_ms": 0.4}
    point = {"x": 200, "latency": {"p50_ms": p50}, "build_s": build, "build_commits": 996,
             "build_relay_cpu_s": 1.0, "build_bench_cpu_s": 1.3, "relay_cpu_per_post_ms": 3.0,
             **big}
    return {"scaling": {"result": {"members_per_room": [small, {"x": 10, "error": "x"},
                                                        point]}}}


def test_a_room_of_200_built_within_5_s_is_met() -> None:
    row = _one(goals41.room_build, _members(2.0, 1.0))
    assert row[2:5] == ["2.00 s", "room of 2 0.03 s", "≤ 5 s"] and row[-1] == "met"


def test_a_slow_build_is_put_against_its_commits_and_a_commit_s_time() -> None:
    row = _one(goals41.room_build, _members(8.0, 1.0, commit_p50_ms=6.0))
    assert "996 commits one after another" in row[-1]
    assert "6.0 ms at p50, so 6.0 s for all" in row[-1]
    assert "the relay's CPU 1.0 s, the fake clients' 1.3 s" in row[-1]
    older = _one(goals41.room_build, _members(8.0, 1.0))  # a run before the commit was timed
    assert "each waiting for its fsync;" in older[-1]


def test_a_room_of_200_within_8x_a_room_of_2_is_met() -> None:
    row = _one(goals41.room_spread, _members(2.0, 3.9))
    assert row[2] == "3.9 ms (7.8×)" and row[-1] == "met"


@pytest.mark.parametrize(("big", "bound"), [
    ({"relay_cpu_per_post_ms": 4.5}, "not met: bounded by the relay's CPU"),
    ({"bench_cpu_per_post_ms": 2.0}, "not met: bounded by CPU:"),
    ({"bench_cpu_per_post_ms": 0.5}, "not met, and not by CPU alone"),
    ({}, "the fake members' CPU per post was not recorded in this run"),
])
def test_a_room_of_200_over_8x_says_whose_cpu_bounds_it(big: dict[str, float],
                                                          bound: str) -> None:
    """The goal is 8 × 0.5 = 4 ms a post: the relay's 3 ms and the fake members' CPU against it."""
    row = _one(goals41.room_spread, _members(2.0, 6.0, **big))
    assert row[2] == "6.0 ms (12.0×)" and bound in row[-1] and "the goal" in row[-1]


def test_a_curve_without_its_200_point_is_not_measured() -> None:
    runs = _members(2.0, 1.0)
    runs["scaling"]["result"]["members_per_room"][-1] = {"x": 200, "error": "TooSlowError"}
    table = goals(runs)
    assert "| 41 | room of 200: built | not measured in this run |" in table
    assert "| 41 | room of 200: post → last member, p50 | not measured in this run |" in table


def test_the_room_of_real_daemons_is_a_measured_row_with_its_cpu() -> None:
    cpu = {"relay": 3.8, "host": 3.1, "guests_total": 42.8, "busiest_guest": 2.5}
    runs = {"big_room": {"result": {
        "members": 20, "room_of_2": {"p50_ms": 4.0}, "room_of_20": {"p50_ms": 40.0},
        "cpu_ms_per_op": {"room_of_2": cpu, "room_of_20": cpu}}}}
    row = _one(goals41.real_room, runs)
    assert row[1:4] == ["room of 20 real daemons: fact → last member, p50", "40.0 ms (10.0×)",
                        "room of 2, same daemons 4.0 ms"]
    assert row[-1].startswith("measured: per op the guests' daemons spent 42.8 ms")


def _disk(sender: float, recipient: float) -> dict[str, Any]:
    return {"disk_per_message": {"result": {
        "payload_bytes": 200, "sender_bytes_per_message": sender,
        "recipient_bytes_per_message": recipient,
        "sender_by_table": {"sent_messages": 355.0},
        "recipient_by_table": {"notices": 68.3, "held_messages": 1382.3, "search_fts_data": 136.5,
                               "attention_record": 54.6}}}}


def test_disk_within_1_kb_on_both_sides_is_met() -> None:
    row = _one(goals41.disk, _disk(806.0, 928.4))
    assert row[2] == "sender 806 B, recipient 928 B" and row[-1] == "met"


def test_disk_over_1_kb_names_that_side_s_largest_parts() -> None:
    row = _one(goals41.disk, _disk(806.0, 1928.4))
    assert row[-1] == ("not met: the largest parts, bytes per message: recipient "
                       "`held_messages` 1,382, `search_fts_data` 136, `notices` 68")


def test_the_soak_row_says_where_its_figures_are() -> None:
    row = _one(goals41.soak, {})
    assert row[2] == "not measured in this run"
    assert "python -m bench.disk_per_message --soak" in row[-1]


def test_each_issue_41_row_says_not_measured_when_its_benchmark_did_not_run() -> None:
    table = goals({})
    for path in ("send → held, p99 ÷ p50", "send → pushed into a busy Claude Code session",
                 "room of 200: built", "a room of real daemons: fact → last member",
                 "disk per 200-byte message"):
        assert f"| 41 | {path} | not measured in this run | — | — | — |" in table, path
    assert "| 22, 41 | send → held, p50 | not measured in this run |" in table


def test_the_members_section_gives_the_bounds_the_room_rows_use() -> None:
    """The figures a room-of-200 row not met cites are in the curve's own section too, and a run
    from before they were recorded renders without them."""
    from bench.page.scale import _members_text

    points = _members(8.0, 6.0, commit_p50_ms=4.0, bench_cpu_per_post_ms=5.5)["scaling"][
        "result"]["members_per_room"]
    for point in points[::2]:
        point.update(build_add_accept_s=1.0, build_commits=996, build_relay_cpu_s=1.0,
                     build_bench_cpu_s=1.3, bench_cpu_per_post_ms=5.5, commit_p50_ms=4.0)
    text = _members_text(points)
    assert "The fake members' CPU per post, receiving it: 5.50 ms at 2, 5.50 ms at 200." in text
    assert "4.0 ms at p50, so its 996 commits take 4.0 s at least." in text
    for point in points[::2]:
        del point["commit_p50_ms"], point["bench_cpu_per_post_ms"]
    assert "fake members' CPU per post" not in _members_text(points)
