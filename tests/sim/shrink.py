"""Delta debugging of a failing seed (the seed, and so every stream, stays fixed).

Two passes, as simulation.md §5 says: first the action list, then the fault schedule. A
candidate counts only if the *same checker* still fails. Halves, then quarters, ... then single
entries are removed while the failure holds (Zeller's ddmin, simplified); each pass is bounded by
``budget`` runs. Removing actions never moves a fault (the runner draws the schedule over the
whole scenario's horizon), so what is left replays with ``--ops`` and ``--faults``.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.sim.faults import schedule
from tests.sim.runner import run_seed
from tests.sim.workload import generate


def fails(seed: int, keep: set[int] | None, faults: set[int] | None, checker: str,
          plant: str | None, nodes: int | None = None) -> bool:
    outcome = run_seed(seed, keep=keep, plant=plant, faults_keep=faults, relay_nodes=nodes)
    return any(f.checker == checker for f in outcome.failures)


def _ddmin(items: list[int], still_fails: Callable[[list[int]], bool], budget: int) -> list[int]:
    keep = list(items)
    chunk = max(1, len(keep) // 2)
    runs = 0
    while chunk >= 1 and runs < budget and keep:
        i, removed = 0, False
        while i < len(keep) and runs < budget:
            candidate = keep[:i] + keep[i + chunk:]
            runs += 1
            if still_fails(candidate):
                keep, removed = candidate, True
            else:
                i += chunk
        if not removed:
            chunk //= 2
    return keep


def _faults_of(seed: int) -> list[int]:
    scenario = generate(seed)
    horizon = max((a.at for a in scenario.actions), default=0.0)
    return [f.index for f in schedule(seed, scenario.nodes, horizon)[1]]


def shrink(seed: int, checker: str, plant: str | None = None, budget: int = 60, *,
           keep: set[int] | None = None, faults: set[int] | None = None,
           nodes: int | None = None) -> tuple[list[int], list[int]]:
    """Smaller lists of action and fault indexes with which ``checker`` still fails at ``seed``
    (on ``nodes`` relays: None, the seed's own choice)."""
    actions = sorted(keep) if keep is not None else [a.index for a in generate(seed).actions]
    chosen = sorted(faults) if faults is not None else _faults_of(seed)
    actions = _ddmin(actions, lambda c: bool(c) and fails(seed, set(c), set(chosen), checker,
                                                          plant, nodes), budget)
    chosen = _ddmin(chosen, lambda c: fails(seed, set(actions), set(c), checker, plant, nodes),
                    budget)
    return actions, chosen


def describe(seed: int, actions: list[int], faults: list[int]) -> list[str]:
    """The shrunk run, one line per action and fault, in time order."""
    scenario = generate(seed)
    horizon = max((a.at for a in scenario.actions), default=0.0)
    lines = [(a.at, f"t={a.at:8.3f}  #{a.index:<3} {a.node} {a.kind} "
                    f"{' '.join(f'{k}={v}' for k, v in sorted(a.args.items()))}")
             for a in scenario.actions if a.index in set(actions)]
    lines += [(f.at, f"t={f.at:8.3f}  fault {f.index}: {f.kind} {f.target or 'all'} "
                     f"{f.size:.3f}")
              for f in schedule(seed, scenario.nodes, horizon)[1] if f.index in set(faults)]
    return [f"pairs {' '.join('+'.join(p) for p in scenario.pairs)}"] + [
        text for _, text in sorted(lines, key=lambda x: x[0])]


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
