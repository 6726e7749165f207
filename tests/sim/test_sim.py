"""CI entry for the simulation: many seeds, a determinism canary, and one planted bug per invariant.

Seeds run in a subprocess (``python -m tests.sim``, PYTHONHASHSEED=0, a pool of 2) so a seed
replays there exactly as it does from the printed line. ``SIM_SEEDS`` overrides the count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI_SEEDS = int(os.environ.get("SIM_SEEDS", "300"))
PLANT_SEEDS = 40  # a planted bug must be caught within the first PLANT_SEEDS CI seeds


def _sim(*args: str, timeout: float = 900) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    done = subprocess.run([sys.executable, "-m", "tests.sim", *args, "--json"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.stdout.strip(), done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _summary(results: list[dict[str, Any]]) -> str:
    lines = []
    for r in results:
        if r["failures"]:
            kinds = sorted({f[0] for f in r["failures"]})
            lines.append(f"seed {r['seed']} {kinds}: {r['failures'][0][1]}  "
                         f"(replay: PYTHONHASHSEED=0 python -m tests.sim --seed {r['seed']})")
    return "\n".join(lines)


def test_ci_seeds_pass() -> None:
    """CI_SEEDS seeds, every invariant checked; a failure names each seed and its replay line."""
    out = _sim("--seeds", str(CI_SEEDS), "--jobs", "2")
    failed = [r for r in out["results"] if r["failures"]]
    assert not failed, f"{len(failed)}/{len(out['results'])} seeds failed:\n{_summary(failed)}"


def test_same_seed_same_run() -> None:
    """The determinism canary: a seed run twice (two processes) gives the same hash."""
    hashes = set()
    for _ in range(2):
        out = _sim("--seeds", "3", "--start", "7", "--jobs", "1")
        hashes.add(tuple(r["digest"] for r in out["results"]))
    assert len(hashes) == 1, hashes


@pytest.mark.parametrize(
    ("plant", "checker"),
    [
        ("drop_sender", "delivery"),
        ("claim_flip", "claims"),
        ("leaky_relay", "removed"),
        ("roster_ignores", "roster"),
        ("state_regress", "state"),
    ],
)
def test_planted_bug_is_caught(plant: str, checker: str) -> None:
    """Each invariant's checker catches its planted bug within the first PLANT_SEEDS seeds."""
    out = _sim("--seeds", str(PLANT_SEEDS), "--jobs", "2", "--plant", plant)
    caught = [r["seed"] for r in out["results"] if any(f[0] == checker for f in r["failures"])]
    assert caught, f"{plant}: {checker} never failed in {PLANT_SEEDS} seeds"
