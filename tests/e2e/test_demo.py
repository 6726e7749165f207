"""`crosstalk demo` runs the whole flow and leaves nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_demo_pairs_sends_remembers_and_cleans_up() -> None:
    """The demo's summary shows a crossing pairing, a message, a fact and a won claim."""
    before = set(Path("/tmp").glob("ct-demo-*"))
    proc = subprocess.run(
        [sys.executable, "-m", "crosstalk", "demo", "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary == {"paired": True, "messages": 1, "facts": 1, "tasks": 1, "claim": "won"}
    assert set(Path("/tmp").glob("ct-demo-*")) == before


def test_demo_human_output_shows_the_words_and_both_fingerprints() -> None:
    """The readable run names the invite words and the crossing them/you lines."""
    proc = subprocess.run(
        [sys.executable, "-m", "crosstalk", "demo"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "crosstalk room join" in proc.stdout
    assert proc.stdout.count("them ") == 2 and "Cleaned up" in proc.stdout
