"""Delta debugging of a failing seed's action list (the seed, and so every stream, stays fixed).

A candidate counts only if the *same checker* still fails. First halves, then quarters, ... then
single actions are removed while the failure holds (Zeller's ddmin, simplified); bounded by
``budget`` runs.
"""

from __future__ import annotations

from tests.sim.runner import run_seed
from tests.sim.workload import generate


def fails(seed: int, keep: set[int], checker: str, plant: str | None) -> bool:
    return any(f.checker == checker for f in run_seed(seed, keep=keep, plant=plant).failures)


def shrink(seed: int, checker: str, plant: str | None = None, budget: int = 60) -> list[int]:
    """A smaller list of action indexes with which ``checker`` still fails at ``seed``."""
    keep = [a.index for a in generate(seed).actions]
    chunk = max(1, len(keep) // 2)
    runs = 0
    while chunk >= 1 and runs < budget:
        i, removed = 0, False
        while i < len(keep) and runs < budget:
            candidate = keep[:i] + keep[i + chunk:]
            runs += 1
            if candidate and fails(seed, set(candidate), checker, plant):
                keep, removed = candidate, True
            else:
                i += chunk
        if not removed:
            chunk //= 2
    return keep


def ranges(indexes: list[int]) -> str:
    """``0,3,7-9`` for [0, 3, 7, 8, 9]."""
    out: list[str] = []
    for i in sorted(indexes):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == i - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        elif out and "-" not in out[-1] and int(out[-1]) == i - 1:
            out[-1] = f"{out[-1]}-{i}"
        else:
            out.append(str(i))
    return ",".join(out)


def parse_ranges(text: str) -> set[int]:
    keep: set[int] = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        keep.update(range(int(lo), int(hi or lo) + 1))
    return keep
