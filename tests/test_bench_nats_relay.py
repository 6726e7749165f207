"""bench.nats_relay's rows from several rounds: medians, and each round's ratio to one node."""

from __future__ import annotations

from typing import Any

from bench.nats_relay import medians, section


def run(ops: float, cpu: list[float], nats: float = 0.03, client: float = 0.14) -> dict[str, Any]:
    return {"ops_per_s": ops, "cpu_ms_per_op": cpu, "busiest_share": max(cpu) / sum(cpu),
            "relay_cpu_s": sum(cpu), "nats_cpu_ms_per_op": nats, "client_cpu_ms_per_op": client,
            "window_s": 5.0}


def test_a_row_is_the_median_of_its_rounds_and_its_ratio_pairs_each_round_with_one_node() -> None:
    """Three rounds whose load moved: the ratio is the median of each round's own ratio
    (1.1, 0.5, 1.2 -> 1.1), not the ratio of the medians (2,200 / 3,000 = 0.73)."""
    ones = [run(2000, [0.14]), run(4000, [0.13]), run(3000, [0.15])]
    twos = [run(2200, [0.09, 0.08]), run(2000, [0.085, 0.09]), run(3600, [0.07, 0.08])]
    row = medians(twos, ones)
    assert row["ops_per_s"] == 2200
    assert row["ratio_to_one"] == 1.1
    assert row["cpu_ms_per_op"] == [0.085, 0.08]
    assert row["relay_cpu_ms_per_op"] == 0.17
    assert row["ops_per_s_each_round"] == [2200, 2000, 3600]
    assert medians(ones, ones)["ratio_to_one"] == 1.0


def test_the_page_gives_the_rounds_ratio_and_the_clients_cpu() -> None:
    """The table's ÷ 1 node is the rounds' ratio, and the text says how many rounds."""
    ones = [run(2000, [0.14]), run(4000, [0.13]), run(3000, [0.15])]
    twos = [run(2200, [0.09, 0.08]), run(2000, [0.085, 0.09]), run(3600, [0.07, 0.08])]
    result = {"pinned": True, "pairs": 8, "window": 16, "rounds": 3,
              "sqlite": {"ops_per_s": 6000.0},
              "nodes": {"1": medians(ones, ones), "2": medians(twos, ones)}}
    page = section(result)
    assert "| 2 | 2,200 | 1.10× | 0.085 / 0.080 | " in page
    assert "median of 3 rounds" in page
    assert "| 0.140 |" in page  # the fake clients' CPU per op
