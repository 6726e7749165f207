"""The benchmark suite's smoke run: every benchmark at smoke size, the page and its plots written
to a temporary directory (never over docs/). No timing is asserted: figures only need to exist."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip(
    "matplotlib", reason="the bench extra is not installed: pip install -e '.[test,bench]'"
)


@pytest.mark.e2e
def test_quick_bench_writes_every_section_plot_and_figure(tmp_path: Path) -> None:
    """`python -m bench --quick --out DIR` exits 0 and writes every section, plot and result."""
    docs_page = (ROOT / "docs" / "performance.md").read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    page = (tmp_path / "performance.md").read_text()
    for heading in ("## Side by side", "## Daemon", "## Relay throughput", "## Pairing", "## Hook",
                    "### Members per room", "### Rooms per daemon", "### Connections per relay",
                    "## Relay nodes on NATS JetStream"):
        assert heading in page, heading
    images = re.findall(r"!\[[^]]*\]\((performance/[^)]+\.png)\)", page)
    assert len(images) == 5, images
    for image in images:
        assert (tmp_path / image).read_bytes().startswith(b"\x89PNG"), image
    results = json.loads((tmp_path / "performance" / "results.json").read_text())
    assert results["quick"] is True
    ours = {"daemon", "latency", "peers", "relay_throughput", "pairing", "catchup", "hook",
            "scaling"}
    assert set(results["runs"]) >= ours
    assert all("result" in results["runs"][name] for name in ours), results["runs"]
    # Later modules may be skipped only for a missing nats-server, never fail.
    assert all("error" not in run for run in results["runs"].values()), results["runs"]
    latency = results["runs"]["latency"]["result"]
    held, printed = latency["send_to_held"], latency["send_to_hook_printed"]
    assert held["n"] == 10 and 0 < held["p50_ms"] <= held["p99_ms"]
    # A notice cannot be printed by the hook before the message is held at the daemon.
    assert printed["n"] == 3 and printed["p50_ms"] >= latency["notice_hook_run"]["p50_ms"] > 0
    assert "notice printed by recipient's hook" in page
    # The pushes into a busy session (bench/push.py), on the same daemons as send → held.
    assert latency["pushes"] == 3
    for path in ("inbox", "channel"):
        pushed, surfaced = latency[f"send_to_{path}_pushed"], latency[f"send_to_{path}_surfaced"]
        assert pushed["n"] == 3 and 0 < pushed["p50_ms"] <= pushed["p99_ms"]
        # Every push follows its own notice's surfacing, so the medians keep that order.
        assert pushed["p50_ms"] >= surfaced["p50_ms"] > 0
        assert len(latency[f"{path}_samples_ms"]) == 3
    assert "| **crosstalk send → pushed into a busy session's inbox socket** |" in page
    assert "| **crosstalk send → channel notification from `crosstalk server` (MCP)** |" in page
    assert "See `bench/push.py`" in page
    if shutil.which("py-spy"):  # the test extra installs it: the daemons' CPU, by kind of work
        profile = results["runs"]["timeline"]["result"]["cpu_profile"]
        assert set(profile) == {"sender", "relay", "recipient"}, profile
        # A quick run's few messages may leave a process with no sample at all under load (py-spy
        # samples only while the GIL is held): its shares are then empty, never a partial sum.
        assert all(not shares or abs(sum(shares.values()) - 1) < 1e-6
                   for shares in profile.values()), profile
        assert "| CPU per message, by kind of work |" in page
    assert "`crosstalk read --json`" in page
    assert "send → notice at the recipient's hook" not in page.split("## Not measured yet")[1]
    assert (ROOT / "docs" / "performance.md").read_bytes() == docs_page  # docs/ untouched
