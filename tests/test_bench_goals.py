"""bench/page/goals.py: the page's table of issue 22's goals, built from a run's results (issue
41's rows: tests/test_bench_goals41.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench.cpu_profile import CRYPTO, OURS, SCHEDULING
from bench.page.goals import goals

RESULTS = Path(__file__).parent.parent / "docs" / "performance" / "results.json"


def _runs() -> dict[str, Any]:
    runs: dict[str, Any] = json.loads(RESULTS.read_text())["runs"]
    return runs


def _row(table: str, path: str) -> str:
    """The row whose path cell (after the issue's) starts with ``path``."""
    return next(line for line in table.splitlines()
                if line.startswith("| ") and line.split(" | ", 1)[-1].startswith(path))


def test_every_goal_has_a_row_with_a_verdict() -> None:
    table = goals(_runs())
    for path in ("send → held, p50", "send → held, p99", "hook process", "`crosstalk server`",
                 "`crosstalk read --json`", "daemon cold start", "relay, 500 clients",
                 "catch-up", "send, read, hook, status"):
        assert "met" in _row(table, path)


def test_a_goal_not_met_says_what_bounds_it() -> None:
    """Held above crosschat names the durability floor; a relay row short of its goal names
    the cores its rate would take, or says that CPU alone does not explain it."""
    runs = copy.deepcopy(_runs())
    runs["latency"]["result"]["send_to_held"]["p50_ms"] = 99.0
    runs["timeline"]["result"]["alone"]["wal_commit"]["p50_ms"] = 0.1  # a floor below crosschat
    relay = runs["relay_throughput"]["result"]
    row = next(x for x in relay["runs"] if (x["clients"], x["room_size"], x["window"])
               == (500, 2, 1))
    row["ops_per_s"], row["relay_cores"], row["client_cores"] = 100, 0.01, 0.01
    table = goals(runs)
    assert "the processes' own work" in _row(table, "send → held, p50")
    runs["timeline"]["result"]["alone"]["wal_commit"]["p50_ms"] = 40.0
    assert "bounded by our durability" in _row(goals(runs), "send → held, p50")
    assert "not by CPU alone" in _row(table, "relay, 500 clients, 1 in flight, rooms of 2 ")
    runs["latency"]["result"]["send_to_held"]["p50_ms"] = 0.1
    assert _row(goals(runs), "send → held, p50").endswith("| met |")


def test_a_run_that_did_not_complete_is_said_so() -> None:
    runs = _runs()
    del runs["catchup"]
    assert "not measured in this run" in goals(runs)


def test_a_p99_over_its_goal_says_whether_the_tail_is_the_machine_s() -> None:
    runs = copy.deepcopy(_runs())
    held, echo = runs["latency"]["result"]["send_to_held"], runs["latency"]["result"][
        "ws_echo_round_trip"]
    echo["p50_ms"], echo["p99_ms"] = 0.5, 1.0
    held["p50_ms"], held["p99_ms"] = 6.0, 12.0  # as wide as the echo's tail
    row = _row(goals(runs), "send → held, p99")
    assert "bounded by the p50" in row and "a p50 of 5.0 ms" in row
    held["p99_ms"] = 30.0  # five times the p50: wider than the machine's
    assert "wider than the machine's" in _row(goals(runs), "send → held, p99")
    held["p99_ms"] = 9.0
    assert _row(goals(runs), "send → held, p99").endswith("| met |")


def test_a_slow_catch_up_splits_into_the_opening_floor_and_the_rest() -> None:
    runs = copy.deepcopy(_runs())
    result = runs["catchup"]["result"]
    result["missed_ops"]["seconds"], result["missed_ops"]["ops"] = 1.5, 10_000
    result["open_floor"]["as_actor_seconds"] = 0.75
    row = _row(goals(runs), "catch-up")
    assert "takes 0.75 s on this machine" in row and "other 0.75 s (75 µs per op)" in row
    result["missed_ops"]["seconds"] = 0.9
    assert _row(goals(runs), "catch-up").endswith("| met |")


def test_a_slow_cold_start_is_put_against_the_machine_s_interpreter() -> None:
    runs = copy.deepcopy(_runs())
    daemon = runs["daemon"]["result"]
    daemon["daemon_cold_start_s"], daemon["bare_interpreter_start_s"] = 0.4, 0.1
    row = _row(goals(runs), "daemon cold start")
    assert "4.0× its bare interpreter's start" in row and "starts in 75 ms" in row
    daemon["daemon_cold_start_s"] = 0.2
    assert _row(goals(runs), "daemon cold start").endswith("| met |")


def test_a_send_slower_than_crosschat_cites_the_daemons_profile_when_it_was_taken() -> None:
    runs = copy.deepcopy(_runs())
    runs["latency"]["result"]["send_to_held"]["p50_ms"] = 99.0
    runs["timeline"]["result"]["alone"]["wal_commit"]["p50_ms"] = 0.1
    runs["timeline"]["result"].pop("cpu_profile", None)
    assert "trio's scheduling" not in _row(goals(runs), "send → held, p50")
    runs["timeline"]["result"]["cpu_profile"] = {
        "sender": {SCHEDULING: 0.42, OURS: 0.17, CRYPTO: 0.03},
        "recipient": {SCHEDULING: 0.35, OURS: 0.21, CRYPTO: 0.04},
    }
    row = _row(goals(runs), "send → held, p50")
    assert "puts 35%-42% of their CPU in trio's scheduling" in row
    assert "17%-21% in our actors' own code and 3%-4% in crypto" in row
