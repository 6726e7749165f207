"""bench/search.py at smoke size: no timing is asserted (the machine is shared); the figures
must exist, come from the stores it built, and reach the page under their own heading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from bench.__main__ import others
from bench.report import other
from bench.search import CONTENT_CLASSES

ROOT = Path(__file__).resolve().parents[1]


def test_python_m_bench_runs_it_with_json_and_quick() -> None:
    """`python -m bench` finds the module and runs it as the others (``--json``, ``--quick``)."""
    assert ("search", ["bench.search", "--json", "--quick"]) in others(quick=True)
    assert ("search", ["bench.search", "--json"]) in others(quick=False)


def test_a_smoke_run_measures_every_class_and_the_index_price(tmp_path: Path) -> None:
    """3,000 messages: every query class timed on both stores, matches counted, the index's
    price per held message measured against the same holds without it, the section written."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.search", "--quick", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert (result["messages"], result["baseline_messages"]) == (3000, 1000)
    assert set(CONTENT_CLASSES) < set(result["classes"])
    for figures in result["classes"].values():
        assert 0 < figures["p50_ms"] <= figures["p95_ms"] <= figures["p99_ms"]
    assert result["classes"]["stopword"]["matches_median"] > 1000  # "the", in most messages
    index = result["index"]
    assert index["hold_us_with_index"] > index["hold_us_without_index"] > 0
    section = other("search", {"result": result})
    assert section.startswith("## Search over 100,000 held messages (`bench/search.py`)")
    assert "| stopword |" in section and "python3 -m bench --only search" in section
