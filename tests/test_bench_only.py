"""``python -m bench --only``: the benchmarks re-measured apart replace theirs and say at what
load, while the page's load and date stay the full run's (bench/__main__.py, bench/report.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import report
from bench.__main__ import merge_alone

RESULTS = Path(__file__).parent.parent / "docs" / "performance" / "results.json"


def _alone_run(figure: float) -> dict[str, Any]:
    return {"result": {"figure": figure}, "wall_s": 1.0, "load_before": 4.1, "load_after": 5.0,
            "date": "2026-12-06"}


def test_a_benchmark_measured_alone_replaces_its_run_and_keeps_the_full_run_s_load() -> None:
    previous: dict[str, Any] = {
        "quick": False, "machine": {"cores": 2}, "load_before": 0.5, "load_after": 2.0,
        "wall_s": 500.0,
        "runs": {"a": {"result": {"figure": 1.0}}, "b": {"result": {"figure": 2.0}}}}
    merged = merge_alone(previous, {"b": _alone_run(3.0)})
    assert merged["load_before"] == 0.5 and merged["load_after"] == 2.0
    assert merged["wall_s"] == 500.0
    assert merged["runs"]["a"] == {"result": {"figure": 1.0}}
    assert merged["runs"]["b"]["result"] == {"figure": 3.0} and merged["runs"]["b"]["alone"]
    assert previous["runs"]["b"] == {"result": {"figure": 2.0}}  # not changed in place


def test_the_page_names_each_benchmark_measured_apart_with_its_load(tmp_path: Path) -> None:
    results = json.loads(RESULTS.read_text())
    intro = report.render(results, tmp_path).split("\n## ", 1)[0]
    assert "Measured apart afterwards" not in intro
    results["runs"]["pairing"].update(alone=True, load_before=4.1, load_after=5.0,
                                      date="2026-12-06")
    intro = report.render(results, tmp_path).split("\n## ", 1)[0]
    assert ("Measured apart afterwards with `python -m bench --only`, at their own load: "
            "`pairing` on 2026-12-06 (load 4.1 before, 5.0 after).") in intro
