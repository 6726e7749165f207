"""CI entry for the simulation: many seeds, a determinism canary, and one planted bug per invariant.

Seeds run in a subprocess (``python -m tests.sim``, PYTHONHASHSEED=0, a pool of 2) so a seed
replays there exactly as it does from the printed line. ``SIM_SEEDS`` overrides the count. The
seeds in ``regressions.txt`` (each once failed) run first, on top of the CI seeds.
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
REGRESSIONS = Path(__file__).with_name("regressions.txt")
KNOWN = Path(__file__).with_name("known_failures.txt")
CI_SEEDS = int(os.environ.get("SIM_SEEDS", "300"))
PLANT_SEEDS = 40  # a planted bug must be caught within PLANT_SEEDS seeds of its first
CANARY_SEEDS = ("7", "3")  # --start, --seeds: run twice, every hash must match

# What a CI run must have exercised (in at least one seed), or its passing proves little.
FAULT_KINDS = ("drop", "delay", "cut", "freeze", "relay_crash", "daemon_crash", "clock_jump",
               "skew")
MUST_COVER = (
    *(f"fault:{k}" for k in FAULT_KINDS),
    "buggify:store.after_commit", "buggify:store.slow",
    "check:delivery", "check:claims", "check:removed", "check:roster", "check:link",
    "check:memory", "check:caught_up", "check:reservations", "check:reservations:granted",
    "check:reservations:rekey",
    # Not check:state:delivered: the liveness phase reads everything, so a delivered message
    # ends read unless its receipt is lost (which only the receipts bug, now fixed, did).
    "check:state:sent", "check:state:read", "check:state:refused",
    "fault:disk_full", "buggify:store.disk_full", "buggify:store.commit_fails",
    "buggify:store.slow_fsync", "check:durable", "check:recovered", "fault:busy",
    # The control socket (tests/sim/door.py): clients that hang up mid-request, slow readers.
    "fault:hang_up", "fault:slow_reader", "check:hangup:took",
    # Pairing through the real flow (tests/sim/pairing.py), with its faults.
    "pairing:none", "pairing:drop", "pairing:wrong_word", "pairing:racer", "pairing:retry",
    "fault:pairing_drop", "check:pairing",
    "fault:half_open", "buggify:relay.slow_commit", "buggify:relay.crash_in_commit",
    # Two relay nodes on NATS (tests/sim/nats_relay.py): their faults, and reconnects that
    # land on the other node.
    "relay:two_nodes", "fault:node_crash", "fault:feed_delay", "buggify:node.crash_in_publish",
    "relay:moved_node",
    *(f"buggify:handoff.{h}" for h in ("link_to_router", "router_to_room", "room_outbound",
                                       "router_to_membership")),
)


# Each probe (sim_hooks.probe: an important branch) must be reached in at least this share of
# CI's seeds (about half the rate measured at 300 seeds; docs/performance.md, "Simulation"), or
# CI fails: a branch the seeds stop reaching is a branch a planted bug there would survive.
PROBE_MIN = {
    "memory.snapshot_installed": 0.40,
    "supervisor.storage_retry": 0.15,
    "rooms.create_unconfirmed": 0.06,
    # 1.6 % of 318 seeds since the relay is the real shell (a6676c6; 6 % before).
    "memory.hole_conceded": 0.008,
    "memory.claim_pending": 0.02,
    "room.held_future_epoch": 0.02,
    # room.held_unknown_sender is not enforced here any more: no seed of 318 reached it once the
    # relay became the real shell (a6676c6; three of ~319 before). The placed case
    # joined_while_away (tests/sim/placed.py, run by test_scenarios and mutate.py) takes it
    # every run.
    "room.key_taken_ahead": 0.002,  # one seed of ~316 (seed 169): still a rekey mid-batch
    # The control socket and pairing (tests/sim/door.py, pairing.py), about half the rates of
    # 318 runs at 8ca7521 (31.4 %, 23.9 %, 5.0 %, 3.1 %, 1.6 %: five seeds).
    "control.reply_undeliverable": 0.15,
    "control.stream_hung_up": 0.12,
    "pairing.reattached": 0.025,
    "pairing.restarted": 0.015,
    # A drop under the room of two's create or add, asked again (0e76fd6): 0.9 % of 320 at
    # dbb89e2. Its twin pairing.accept_retried (1.6 % at 8ca7521) was reached by none of them
    # once the day's merges moved the schedules: not enforced; tests/features/
    # test_pairing_accept.py takes that branch on purpose.
    "pairing.create_retried": 0.004,
    # The relay shell's heartbeat drops a link whose pings go unanswered (a half-open link).
    "relay.ping_unanswered": 0.15,  # 31.8 % of 318 seeds (the half_open fault)
    # The relay nodes on NATS, in the seeds that run two (one in five): of 320 runs at 9dfcdc2,
    # 13.4 % lost a compare-and-set, 14.4 % reloaded a unit whose feed had a gap, and 7.2 %
    # reloaded after the stream moved on between a node's load and its feed.
    "node.write_conflict": 0.06,
    "node.feed_gap_reloaded": 0.07,
    "node.feed_caught_up_after_restart": 0.03,
}


def probe_rates(coverage: dict[str, int], runs: int) -> dict[str, float]:
    """Each probe's share of runs that reached it (every probe seen, and every required one)."""
    names = {k.removeprefix("probe:") for k in coverage if k.startswith("probe:")} | set(PROBE_MIN)
    return {n: coverage.get(f"probe:{n}", 0) / runs for n in sorted(names)}


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
            details = "\n    ".join(f"{c}: {d}" for c, d in r["failures"][:4])
            lines.append(f"seed {r['seed']} {kinds}  replay: PYTHONHASHSEED=0 python -m "
                         f"tests.sim --seed {r['seed']} --shrink\n    {details}")
    return "\n".join(lines)


def _known_failures() -> set[int]:
    """Seeds that fail because of product bugs found and not yet fixed (known_failures.txt)."""
    lines = KNOWN.read_text().splitlines()
    return {int(line.split("#")[0]) for line in lines if line.split("#")[0].strip()}


def test_known_failures_are_few_and_explained() -> None:
    """Every listed seed says why; the list stays short (it is a to-do list, not a filter)."""
    lines = [line for line in KNOWN.read_text().splitlines() if line.split("#")[0].strip()]
    assert all("#" in line and line.split("#", 1)[1].strip() for line in lines)
    assert len(lines) <= 12


def test_ci_seeds_pass() -> None:
    """The regression seeds, then CI_SEEDS seeds, all pass but the known failures (product bugs
    found and not yet fixed, listed with their cause); every fault and checker was used."""
    out = _sim("--seeds", str(CI_SEEDS), "--jobs", "2", "--regressions", str(REGRESSIONS))
    coverage = out["coverage"]
    print(f"{len(out['results'])} seeds in {out['elapsed']:.0f} s; runs with each: {coverage}")
    known = _known_failures()
    failed = [r for r in out["results"] if r["failures"] and r["seed"] not in known]
    fixed = sorted(r["seed"] for r in out["results"] if not r["failures"] and r["seed"] in known)
    if fixed:
        print(f"listed in known_failures.txt but passing now (take them off): {fixed}")
    assert not failed, f"{len(failed)}/{len(out['results'])} seeds failed:\n{_summary(failed)}"
    rates = probe_rates(coverage, len(out["results"]))
    print("probes reached (share of seeds): "
          + ", ".join(f"{n} {r:.1%}" + (f" (min {PROBE_MIN[n]:.1%})" if n in PROBE_MIN else "")
                      for n, r in rates.items()))
    if CI_SEEDS >= 300:
        missing = [k for k in MUST_COVER if not coverage.get(k)]
        assert not missing, f"never exercised in {CI_SEEDS} seeds: {missing}"
        rare = {n: f"{rates[n]:.1%} < {m:.1%}" for n, m in PROBE_MIN.items() if rates[n] < m}
        assert not rare, f"branches CI's seeds reach too rarely: {rare}"


def test_same_seed_same_run() -> None:
    """The determinism canary: seeds run twice (two processes) give the same hashes."""
    start, count = CANARY_SEEDS
    runs = [_sim("--seeds", count, "--start", start, "--jobs", "2") for _ in range(2)]
    hashes = [tuple((r["seed"], r["digest"]) for r in out["results"]) for out in runs]
    assert hashes[0] == hashes[1], hashes


# Each plant with the first seed that caught it (2026-12-06): the scan starts there, so a test
# runs a seed or two, and still goes on for PLANT_SEEDS seeds if a change moved the schedules.
@pytest.mark.parametrize(
    ("plant", "checker", "first"),
    [
        ("drop_sender", "delivery", 6),
        ("claim_flip", "claims", 6),
        ("leaky_relay", "removed", 10),
        ("roster_ignores", "roster", 1),
        ("state_regress", "state", 1),
        ("sync_deaf", "memory", 2),  # seed 1 runs on two relay nodes (since 54f07b1)
        ("rows_believed", "roster", 4),
        ("false_alarm", "alarm", 2),
        ("reserve_unchecked", "reservations", 6),
        ("local_clock", "reservations", 14),
        ("amnesia", "durable", 6),
        ("no_second_chance", "recovered", 1),
        ("lost_wakes", "caught_up", 2),
        ("undo_on_hangup", "hangup", 27),
    ],
)
def test_planted_bug_is_caught(plant: str, checker: str, first: int) -> None:
    """Each invariant's checker catches its planted bug within PLANT_SEEDS seeds of ``first``."""
    out = _sim("--seeds", str(PLANT_SEEDS), "--start", str(first), "--jobs", "1", "--plant",
               plant, "--until", checker)
    assert out["caught"] is not None, (
        f"{plant}: {checker} never failed in seeds {first}-{first + PLANT_SEEDS - 1}")
    if out["caught"] != first:
        print(f"{plant} is caught at seed {out['caught']} now, not {first}: update its line")


@pytest.mark.parametrize(
    ("mutant", "seed", "checker"),
    [("held_rejected", None, "rejected"), ("rollback_commits", None, "once"),
     ("provisional_told_final", None, "reservations"), ("pairing_keys_differ", 2, "pairing"),
     # relay_sends_uncommitted at 22: 21 (its seed before) runs on two relay nodes now.
     ("relay_sends_uncommitted", 22, "state"), ("node_lost_cas_taken", 39, "delivery"),
     ("replay_pushes_live", None, "delivery")],
)
def test_checker_catches_its_mutant(mutant: str, seed: int | None, checker: str) -> None:
    """The planted bugs of ``rejected``, ``once``, ``pairing`` and the final answers of
    ``reservations`` are mutants (product code no world composition reaches; tests/sim/mutate.py):
    an op whose sender is not in the roster yet rejected instead of held, and a grant decided on a
    memory that gave ops up told as final, each caught in the placed case that takes that branch
    on purpose (tests/sim/placed.py), and a write that failed committing what it did (a send
    whose COMMIT failed, placed: the refusal left a row, and the retry a second); an inviter
    granting a key other than the one it keeps, at a seed that pairs for real. So is the relay
    shell's: a batch's frames sent before its writes are committed (a post acknowledged,
    then lost when the relay dies mid-commit), caught by ``state`` at its seed, and a live post
    pushed ahead of a resumed device's replay of its room, caught by ``delivery`` in the placed
    case that replays a window at a time. And a relay node's (a seed on two nodes,
    tests/sim/nats_relay.py): a request whose compare-and-set lost answered as if it had won,
    caught by ``delivery`` at seed 39."""
    from tests.sim.mutate import MUTANTS, run_mutant

    chosen = next(m for m in MUTANTS if m.name == mutant)
    if seed is None:
        result = run_mutant(chosen, seeds=0, jobs=1, placed=True)
    else:
        result = run_mutant(chosen, seeds=1, jobs=1, start=seed, placed=False)
    checkers = result.get("checkers")
    assert isinstance(checkers, list) and checker in checkers, result
