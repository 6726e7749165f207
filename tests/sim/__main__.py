"""``python -m tests.sim``: replay one seed, run many (a pool), shrink failures.

    python -m tests.sim --seed 42                 # one seed: its hash, failures, history (--out)
    python -m tests.sim --seed 42 --ops 0,3,7-9   # only those actions (--faults: those faults)
    python -m tests.sim --seed 42 --shrink        # a failing seed: the smallest actions/faults
    python -m tests.sim --seeds 300 --jobs 2      # many; a failing seed prints its replay line
    python -m tests.sim --seeds 300 --regressions tests/sim/regressions.txt   # those first
    python -m tests.sim --seed 40 --relay-nodes 1 # one relay (or 2: two relay nodes), not the
                                                  # seed's own choice
    python -m tests.sim --seeds 100000 --start N  # the soak
    python -m tests.sim --seeds 300 --plant drop_sender --until delivery --json   # a planted
                                                  # bug: stop at the first seed that catches it

Re-execs itself under PYTHONHASHSEED=0 so a seed replays identically in any process.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.sim.determinism import ensure_hashseed


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False).stdout.strip() or "?"
    except OSError:
        return "?"


def _one(job: tuple[int, str | None, int | None]) -> dict[str, Any]:
    from tests.sim.runner import run_seed

    seed, plant, nodes = job
    started = time.perf_counter()
    try:
        o = run_seed(seed, plant=plant, relay_nodes=nodes)
    except Exception as exc:  # the harness itself broke: report the seed, keep going
        return {"seed": seed, "digest": "", "failures": [["harness", repr(exc)]], "s": 0.0,
                "coverage": {}, "profile": [], "relay_nodes": nodes}
    return {"seed": seed, "relay_nodes": nodes, "digest": o.digest,
            "s": round(time.perf_counter() - started, 3),
            "failures": [[f.checker, f.detail] for f in o.failures], "profile": o.profile,
            "coverage": o.coverage}


def replay_line(seed: int, plant: str | None = None, ops: str | None = None,
                faults: str | None = None, nodes: int | None = None) -> str:
    """The one line that replays a seed (at this commit)."""
    extra = f" --relay-nodes {nodes}" if nodes else ""
    extra += f" --plant {plant}" if plant else ""
    extra += f" --ops {ops}" if ops else ""
    extra += f" --faults={faults}" if faults is not None else ""  # may be empty: no faults
    return f"PYTHONHASHSEED=0 python -m tests.sim --seed {seed}{extra}  # commit {_commit()}"


def regression_runs(path: str | None) -> list[tuple[int, int]]:
    """The (seed, relay nodes) listed in ``path``: one a line, ``#`` starts a comment. A seed
    replays on one relay, where the seeds found before the simulation ran two relay nodes
    failed, unless its line says ``nodes=2``."""
    if not path:
        return []
    runs = []
    for line in Path(path).read_text().splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            runs.append((int(words[0]), 2 if "nodes=2" in words[1:] else 1))
    return runs


def coverage_summary(results: list[dict[str, Any]]) -> dict[str, int]:
    """For each fault kind, BUGGIFY point and checker: in how many runs it fired or had work."""
    runs: Counter[str] = Counter()
    for r in results:
        runs.update(r["coverage"].keys())
    return dict(sorted(runs.items()))


def _many(args: argparse.Namespace) -> int:
    from tests.sim.runner import two_nodes

    first = regression_runs(args.regressions)
    # A seed of the range runs on its own choice of relays; a regression seed forced to the
    # other one runs again here.
    jobs: list[tuple[int, str | None, int | None]] = [(s, args.plant, n) for s, n in first]
    jobs += [(s, args.plant, None) for s in range(args.start, args.start + args.seeds)
             if (s, two_nodes(s)) not in first]
    started = time.perf_counter()
    results: list[dict[str, Any]] = []
    caught: int | None = None
    # Imported here, before the pool forks, so each worker starts with the product loaded: a
    # worker is replaced every 50 seeds, and each import cost it about a second of CPU (where
    # no bytecode is cached, PYTHONDONTWRITEBYTECODE=1 as on this machine), a seed's worth.
    import tests.sim.runner  # noqa: F401
    with multiprocessing.get_context("fork").Pool(args.jobs, maxtasksperchild=50) as pool:
        for r in pool.imap(_one, jobs):
            results.append(r)
            if r["failures"] and not args.json:
                kinds = sorted({f[0] for f in r["failures"]})
                line = replay_line(r["seed"], args.plant, nodes=r["relay_nodes"])
                print(f"FAIL seed {r['seed']} {kinds}: {line}", flush=True)
            if args.until and any(args.until in ("any", f[0]) for f in r["failures"]):
                caught = r["seed"]
                break  # leaving the pool's block terminates the seeds still running
    elapsed = time.perf_counter() - started
    failed = [r for r in results if r["failures"]]
    coverage = coverage_summary(results)
    if args.json:
        print(json.dumps({"elapsed": elapsed, "results": results, "caught": caught,
                          "coverage": coverage}))
    else:
        print(f"{len(results)} seeds, {len(failed)} failed, {elapsed:.1f} s "
              f"({len(results) / elapsed:.2f} seeds/s)")
        print("coverage (runs): " + ", ".join(f"{k} {v}" for k, v in coverage.items()))
    if args.until:
        return 0 if caught is not None else 1
    return 1 if failed else 0


def _single(args: argparse.Namespace) -> int:
    from tests.sim.runner import run_seed
    from tests.sim.shrink import describe, parse_ranges, ranges, shrink

    keep = parse_ranges(args.ops) if args.ops else None
    faults = parse_ranges(args.faults) if args.faults is not None else None
    nodes = args.relay_nodes
    o = run_seed(args.seed, keep=keep, plant=args.plant, faults_keep=faults, relay_nodes=nodes)
    print(f"seed {args.seed} hash {o.digest} steps {o.steps} profile {','.join(o.profile)}")
    print(f"coverage {json.dumps(o.coverage, sort_keys=True)}")
    if args.out:
        Path(args.out).write_text("\n".join(o.history) + "\n")
    for f in o.failures:
        print(f"  {f.checker}: {f.detail}")
    if not o.failures:
        return 0
    print(replay_line(args.seed, args.plant, args.ops, args.faults, nodes))
    if args.shrink:
        checker = args.checker or o.failures[0].checker
        small, few = shrink(args.seed, checker, args.plant, keep=keep, faults=faults,
                            nodes=nodes)
        line = replay_line(args.seed, args.plant, ranges(small), ranges(few), nodes)
        print(f"shrunk ({checker}, {len(small)} actions, {len(few)} faults): {line}")
        for line in describe(args.seed, small, few):
            print(f"  {line}")
    return 1


def main(argv: list[str]) -> int:
    ensure_hashseed(argv)
    p = argparse.ArgumentParser(prog="python -m tests.sim")
    p.add_argument("--seed", type=int)
    p.add_argument("--ops", help="only these action indexes, e.g. 0,3,7-9")
    p.add_argument("--faults", help="only these fault indexes (empty: none)")
    p.add_argument("--seeds", type=int, default=0)
    p.add_argument("--start", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--plant", default=None)
    p.add_argument("--until", help="with --seeds: stop at the first seed this checker fails "
                   "('any': any checker)")
    p.add_argument("--regressions", help="a file of seeds to run before the others")
    p.add_argument("--relay-nodes", type=int, choices=(1, 2),
                   help="with --seed: one relay or two relay nodes, not the seed's choice")
    p.add_argument("--json", action="store_true")
    p.add_argument("--out", help="write the history (JSON lines) here")
    p.add_argument("--shrink", action="store_true", help="delta-debug the failing action list")
    p.add_argument("--checker", help="with --shrink: the failure to keep (default: the first)")
    p.add_argument("--commit", help="ignored: the commit the replay line was printed at")
    args = p.parse_args(argv)
    if args.seed is not None:
        return _single(args)
    return _many(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
