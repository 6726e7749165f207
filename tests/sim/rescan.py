"""Find again the seeds that tests/sim/test_scenarios.py pins: ``python -m tests.sim.rescan``.

A placed race still depends on the schedule a seed draws, and any change to how the daemon yields
moves every schedule, so the seeds in which a race happens (or a planted bug shows) move too. This
runs each pinned case over a range of seeds, two at a time, and prints what to pin: the first seeds
in which it happens. Each line is ``CASE SEED RESULT``; the summary at the end names the constants.
"""

from __future__ import annotations

import argparse
import json
from multiprocessing import Pool
from typing import Any

import pytest

CASES = ("raced", "accepted", "roster_plant", "waited", "wait_plant", "asks_plant")


def _case(case: str, seed: int) -> tuple[bool, Any]:
    """Whether ``case`` happens at ``seed`` (a seed to pin), and what was seen."""
    from tests.sim import test_scenarios as ts

    def checkers(outcome: Any) -> list[str]:
        return sorted({f.checker for f in outcome.failures})

    with pytest.MonkeyPatch.context() as mp:
        if case == "raced":
            runs = [checkers(o) for o in ts._kicked_and_invited_back((seed,))]
            return runs == [[]], runs
        if case == "accepted":
            took = [(ts._accepted_after_the_race(o), checkers(o))
                    for o in ts._kicked_and_invited_back((seed,), ts.KICK_INVITE_BACK_ACCEPT)]
            return took == [(True, [])], took
        if case == "roster_plant":
            ts._plant_no_roster(mp)
            caught = ["roster" in checkers(o) for o in ts._kicked_and_invited_back((seed,))]
            return any(caught), caught
        if case == "wait_plant":
            ts._plant_never_behind(mp)
        elif case == "asks_plant":
            ts._plant_old_asks_count(mp)
        elif case != "waited":
            raise ValueError(case)
        outcome = ts._three_paired(seed, ts.REJOINED_WITH_A_HOLE)
        seen = checkers(outcome)
        if case == "waited":
            waited = outcome.coverage.get("probe:kick.waited_for_newer_key", 0) > 0
            return waited and not seen, (waited, seen)
        if case == "wait_plant":
            return {"memory", "rejected"} <= set(seen), seen
        return "memory" in seen, seen


def _job(job: tuple[str, int]) -> tuple[str, int, tuple[bool, Any]]:
    return job[0], job[1], _case(*job)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), help=", ".join(CASES))
    parser.add_argument("--upto", type=int, default=60, help="seeds 1..UPTO")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    jobs = [(case, seed) for case in args.cases for seed in range(1, args.upto + 1)]
    found: dict[str, list[int]] = {case: [] for case in args.cases}
    with Pool(args.jobs, maxtasksperchild=20) as pool:
        for case, seed, (hit, seen) in pool.imap_unordered(_job, jobs):
            print(case, seed, "HIT" if hit else "-", json.dumps(seen), flush=True)
            if hit:
                found[case].append(seed)
    for case, hits in found.items():
        print(f"{case}: {sorted(hits)}")


if __name__ == "__main__":
    main()
