"""``python -m tests.sim.placed``: cases that place a branch the seeds reach only by chance.

A seeded workload meets some branches in a few seeds of hundreds (``PROBE_MIN`` in
tests/sim/test_sim.py), so a bug there survives most seed ranges. Each case here sets the
actions and faults so that the branch is taken every run (the seed still drives scheduling) and
then applies every checker. The mutation script (tests/sim/mutate.py) runs these before its
seeds; tests/sim/test_scenarios.py runs each clean, and tests/sim/test_sim.py runs one with its
mutant planted.

    python -m tests.sim.placed            # every case on its seeds; rc 1 if any failed
    python -m tests.sim.placed --json     # one JSON line: each run's case, seed and failures
    python -m tests.sim.placed --first-failure   # stop at the first run that fails (mutate.py)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import attrs

from tests.sim.determinism import ensure_hashseed
from tests.sim.faults import Fault
from tests.sim.runner import Outcome, run_seed
from tests.sim.truth import Failure
from tests.sim.workload import Action, Scenario

Step = tuple[float, str, str, dict[str, Any]]


@attrs.frozen
class Placed:
    """Actions and faults run by ``nodes`` (each paired as ``pairs`` says) on ``seeds``; ``probe``
    is the coverage key of the branch every run must reach (``probe:…`` for a product probe)."""

    steps: tuple[Step, ...]
    faults: tuple[Fault, ...]
    probe: str
    seeds: tuple[int, ...] = (1, 2)
    nodes: tuple[str, ...] = ("n0", "n1", "n2")
    pairs: tuple[tuple[str, str], ...] = (("n0", "n1"), ("n0", "n2"))
    replay_window: int | None = None  # the relay's, if the case needs a small one

    def scenario(self) -> Scenario:
        actions = tuple(Action(i, at, node, kind, args)
                        for i, (at, node, kind, args) in enumerate(self.steps))
        return Scenario(self.nodes, self.pairs, actions)


# n0 makes rooms r0 and r1 and n1 joins both.
N1_JOINS_TWO_ROOMS: tuple[Step, ...] = (
    (1.0, "n0", "create", {"room": "r0"}),
    (1.0, "n0", "create", {"room": "r1"}),
    (2.0, "n0", "invite", {"room": "r0", "peer": "n1"}),
    (2.0, "n0", "invite", {"room": "r1", "peer": "n1"}),
    (5.0, "n1", "accept", {"room": "r0"}),
    (5.0, "n1", "accept", {"room": "r1"}),
)

# n1 is cut off from 20 s to 80 s. Meanwhile n0 invites n2, who accepts and posts. Back, n1's
# link is handed n2's ops (its name, then its message) before the roster that names n2: they
# must be held until that roster comes, not rejected (room.held_unknown_sender; the mutant
# held_rejected). Were n2 invited before n1 left, n1's roster would carry n2's key already.
JOINED_WHILE_AWAY = Placed(
    steps=(
        (1.0, "n0", "create", {"room": "r1"}),
        (2.0, "n0", "invite", {"room": "r1", "peer": "n1"}),
        (5.0, "n1", "accept", {"room": "r1"}),
        (25.0, "n0", "invite", {"room": "r1", "peer": "n2"}),
        (30.0, "n2", "accept", {"room": "r1"}),
        (35.0, "n2", "send", {"to": "#r1"}),
        (36.0, "n0", "send", {"to": "#r1"}),
        (120.0, "n1", "send", {"to": "#r1"}),
    ),
    faults=(Fault(0, 20.0, "cut", "n1", 60.0),),
    probe="probe:room.held_unknown_sender",
)

# n1 is in two rooms (and the pairing's, first in its cursors) and cut off from 20 s to 60 s
# while n0 posts in both. Once back, its relay link commits each op it was owed and crashes
# before it announces it (an actor crash at that hand-off, three times): each restart resumes
# from the cursors it committed, so the relay replays only what is left, and in the end no op
# has woken a room. The last link-up must wake every room it names, or those it does not stay
# behind until another op comes (caught_up; the mutant link_up_wakes_one wakes only the first).
# The read at 150 s keeps the faults on past the reconnect. At seeds 3 and 5 the link crashes
# twice (once per room) and no node crashes whole (a BUGGIFY crash after a commit restarts the
# node, and a restarted node wakes every room anyway).
LINK_CRASHED_ON_RETURN = Placed(
    steps=(
        *N1_JOINS_TWO_ROOMS,
        (30.0, "n0", "send", {"to": "#r0"}),
        (30.0, "n0", "send", {"to": "#r1"}),
        (150.0, "n0", "read", {}),
    ),
    faults=(Fault(0, 20.0, "cut", "n1", 40.0), Fault(1, 50.0, "actor_crash", "n1", 3.0)),
    probe="crash:handoff.link_to_router",
    seeds=(3, 5),
    nodes=("n0", "n1"),
    pairs=(("n0", "n1"),),
)

# n0 reserves docs/** alone in r1, invites n1 and n2 and is cut off (4 s to 154 s) before they
# accept: neither can get the ops before their join from anyone, so one gives the hole up and
# the other installs its memory (sim seed 437's shape). n1 then reserves docs/** on that memory:
# granted there, and refused on the whole log, as the repair from n0, back, shows. The answer
# must be pending (memory.answer_provisional; the mutant provisional_told_final says granted).
GAVE_UP_THEN_REPAIRED = Placed(
    steps=(
        (1.0, "n0", "create", {"room": "r1"}),
        (2.0, "n0", "reserve", {"room": "r1", "paths": ["docs/**"], "minutes": 60,
                                "shared": False}),
        (3.0, "n0", "invite", {"room": "r1", "peer": "n1"}),
        (3.0, "n0", "invite", {"room": "r1", "peer": "n2"}),
        (6.0, "n1", "accept", {"room": "r1"}),
        (6.0, "n2", "accept", {"room": "r1"}),
        (120.0, "n1", "reserve", {"room": "r1", "paths": ["docs/**"], "minutes": 60,
                                  "shared": False}),
    ),
    faults=(Fault(0, 4.0, "cut", "n0", 150.0),),
    probe="probe:memory.answer_provisional",
)

# n0's disk fails every COMMIT from 29.5 s to 31.5 s, so its send at 30 s is refused with
# storage_full after the work of the send ran; the client tries again 5 s later, as the error
# asks, and that one is stored. A failed write must leave nothing, or the message goes out twice
# (once; the mutant rollback_commits commits what the failed write did).
COMMIT_FAILED_UNDER_A_SEND = Placed(
    steps=(
        (1.0, "n0", "create", {"room": "r1"}),
        (2.0, "n0", "invite", {"room": "r1", "peer": "n1"}),
        (5.0, "n1", "accept", {"room": "r1"}),
        (30.0, "n0", "send", {"to": "#r1"}),
    ),
    faults=(Fault(0, 29.5, "commit_fails", "n0", 2.0),),
    probe="buggify:store.commit_fails",
    nodes=("n0", "n1"),
    pairs=(("n0", "n1"),),
)

# n1 is cut off from 20 s to 70 s while n0 posts twelve messages in r0 and six in r1, then its
# link is slow (0.4 s each way) for 20 s while n0 posts one a second in r0. Back, n1 is owed
# more than the relay's replay window (1 here; 5,000 in production): the relay sends a window,
# then more as n1 acknowledges, and holds n0's live posts in a room back until the replay
# reaches them (relay.replay_paused; the mutant replay_pushes_live pushes them at once, ahead
# of the replay, and n1's link then drops the ops before them as already reported: delivery).
LONG_ABSENCE = Placed(
    steps=(
        *N1_JOINS_TWO_ROOMS,
        *((30.0 + i, "n0", "send", {"to": "#r0"}) for i in range(12)),
        *((50.0 + i, "n0", "send", {"to": "#r1"}) for i in range(6)),
        *((72.0 + i, "n0", "send", {"to": "#r0"}) for i in range(28)),
    ),
    faults=(Fault(0, 20.0, "cut", "n1", 50.0), Fault(1, 70.0, "delay", "n1", 0.4)),
    probe="probe:relay.replay_paused",
    nodes=("n0", "n1"),
    pairs=(("n0", "n1"),),
    replay_window=1,
)

PLACED = {"joined_while_away": JOINED_WHILE_AWAY,
          "long_absence": LONG_ABSENCE,
          "commit_failed_under_a_send": COMMIT_FAILED_UNDER_A_SEND,
          "link_crashed_on_return": LINK_CRASHED_ON_RETURN,
          "gave_up_then_repaired": GAVE_UP_THEN_REPAIRED}


def run_placed(case: Placed, seed: int) -> Outcome:
    """``case`` run at ``seed``; a run that misses the case's branch fails ``placed``."""
    outcome = run_seed(seed, scenario=case.scenario(), faults=list(case.faults),
                       replay_window=case.replay_window)
    if not outcome.coverage.get(case.probe):
        outcome.failures.append(Failure(
            "placed", f"the run never reached {case.probe}: the case no longer places it"))
    return outcome


def main(argv: list[str]) -> int:
    ensure_hashseed(argv, module="tests.sim.placed")
    p = argparse.ArgumentParser(prog="python -m tests.sim.placed")
    p.add_argument("--json", action="store_true")
    p.add_argument("--first-failure", action="store_true", help="stop at the first run that fails")
    args = p.parse_args(argv)
    results = []
    for name, case in PLACED.items():
        for seed in case.seeds:
            outcome = run_placed(case, seed)
            failures = [[f.checker, f.detail] for f in outcome.failures]
            results.append({"case": name, "seed": seed, "failures": failures})
            if not args.json:
                print(f"{name} seed {seed}: " + ("ok" if not failures else
                      "; ".join(f"{c}: {d}" for c, d in failures)), flush=True)
            if failures and args.first_failure:
                break
        if results[-1]["failures"] and args.first_failure:
            break
    if args.json:
        print(json.dumps({"results": results}))
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
