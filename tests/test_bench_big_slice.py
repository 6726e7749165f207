"""bench/big_slice.py: worst loop lag while a several-hundred-MB file slice is sent, at smoke
size. No timing is asserted (the machine is shared); the figures must exist and say the truth."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.__main__ import others
from bench.report import other

ROOT = Path(__file__).resolve().parents[1]


def test_python_m_bench_runs_it_with_json_and_quick() -> None:
    """`python -m bench` finds the module and runs it as the others (``--json``, ``--quick``)."""
    assert ("big_slice", ["bench.big_slice", "--json", "--quick"]) in others(quick=True)
    assert ("big_slice", ["bench.big_slice", "--json"]) in others(quick=False)


@pytest.mark.e2e
def test_a_smoke_run_gives_the_loop_lag_row(tmp_path: Path) -> None:
    """A 16 MiB slice sent once: the daemon's worst loop lag, status round trips asked during the
    send, the send cut to its cap, and the page's row, which names the file's size."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.big_slice", "--quick", "--json", "--mib", "16"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert (result["mib"], result["sends"], result["truncated"]) == (16, 1, True)
    assert result["worst_loop_lag_ms"] >= result["worst_loop_lag_before_ms"] >= 0
    assert result["lag_resolution_ms"] > 0
    assert result["status_during_send"]["n"] >= 1 and result["send"]["n"] == 1
    section = other("big_slice", {"result": result})
    assert section.startswith("## Loop lag under a several-hundred-MB file slice")
    assert "| worst loop lag while a 16 MiB file slice is sent |" in section
