"""``python -m tests.sim.mutate``: plant known bugs in the product, one at a time, and count how
many the simulation's seeds catch.

Each mutant is one text replacement in one product file (the text must occur exactly once, so a
refactor that moves it makes :func:`check` fail instead of a mutant silently planting nothing).
A mutant runs in a temporary copy of the tree (``crosstalk``, ``relay``, ``tests``): the worktree
is never touched. It is caught when a placed case (tests/sim/placed.py: a branch the seeds
reach only by chance, taken on purpose) or a seed fails there, any checker; it survives when
the placed cases and ``--seeds`` seeds all pass.

    python -m tests.sim.mutate                     # every mutant, 60 seeds each, 2 jobs
    python -m tests.sim.mutate --only held_rejected --seeds 100
    python -m tests.sim.mutate --list
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[2]
TREES = ("crosstalk", "relay", "tests")


@attrs.frozen
class Mutant:
    name: str
    path: str
    old: str
    new: str
    why: str
    equivalent: str = ""  # why no run can tell it apart (shown, not assumed): not counted


MUTANTS = (
    Mutant("relay_sends_uncommitted", "relay/server.py",
           "            writes: list[Write] = [e for e in batch if not isinstance(e, _FRAMES)]\n",
           "            writes: list[Write] = [e for e in batch if not isinstance(e, _FRAMES)]\n"
           "            self._dispatch(batch)\n            batch = []\n",
           "the relay shell sends a batch's frames before it has committed the batch's writes"
           " (a post acknowledged and then lost in a crash)"),
    Mutant("held_rejected", "crosstalk/core/room.py",
           'return Decision(Verdict.HOLD, "its sender is not in our roster yet")',
           'return Decision(Verdict.REJECT, "its sender is not in our roster yet")',
           "an op from a sender not yet in the roster is rejected instead of held"),
    Mutant("future_epoch_rejected", "crosstalk/core/room.py",
           'return Decision(Verdict.HOLD, f"we have no key for epoch {epoch} yet")',
           'return Decision(Verdict.REJECT, f"we have no key for epoch {epoch} yet")',
           "an op sealed under a key that has not come yet is rejected instead of held"),
    Mutant("claim_steal", "crosstalk/core/tasks.py",
           "    return TaskResult(None, OutcomeCode.LOST, winner=task.claimer)",
           "    return TaskResult(attrs.evolve(task, claimer=ctx.person), OutcomeCode.WON,"
           " winner=ctx.person)",
           "a claim of a claimed task takes it over (the last claim wins, not the first)"),
    Mutant("storage_gives_up", "crosstalk/actors/supervisor.py",
           "if delay is None and _out_of_storage(child.last_exc):",
           "if delay is None and _out_of_storage(child.last_exc) and False:",
           "an actor crashing on a full disk is FAILED for good (the bug sim seed 9 found)"),
    Mutant("ack_uncommitted", "crosstalk/core/link/resume.py",
           "if op.seq <= self._cursors.get(op.room, 0):",
           "if op.seq <= self._cursors.get(op.room, 0) + 1:",
           "the op after the cursor is acknowledged to the relay without being committed"),
    Mutant("rollback_commits", "crosstalk/store/db.py",
           '            conn.execute("ROLLBACK")\n        raise',
           '            conn.execute("COMMIT")\n        raise',
           "a write that failed commits what it wrote so far instead of rolling it back"),
    Mutant("ack_marks_nothing", "crosstalk/store/messages.py",
           "        if row is not None:\n"
           '            conn.execute("UPDATE held_messages SET read_at',
           "        if row is None:\n"
           '            conn.execute("UPDATE held_messages SET read_at',
           "acknowledging a read lease marks nothing read"),
    Mutant("link_up_wakes_one", "crosstalk/actors/router.py",
           "        for room in up.rooms:\n            await self._wake(room.room)",
           "        for room in up.rooms[:1]:\n            await self._wake(room.room)",
           "after a reconnect only the first room is woken to catch up",
           equivalent="the roster refresh the same link-up starts wakes every room whose "
           "roster it applies (every joined room), and every op the relay replays wakes its "
           "room: in the placed case link_crashed_on_return, where the link crashed before "
           "announcing any op it committed, the rooms the mutant skips are woken by the "
           "membership actor"),
    Mutant("link_up_refreshes_nothing", "crosstalk/actors/router.py",
           "        await self._to_membership(up)\n        for listener",
           "        for listener",
           "after a reconnect the rosters are not fetched again (pushes missed while away stay "
           "missed)"),
    Mutant("overlap_ignored", "crosstalk/core/reservations.py",
           "        return [c for c in found if c is not None]",
           "        return []",
           "a reservation never conflicts with what is held"),
    Mutant("provisional_told_final", "crosstalk/core/memory.py",
           "    return not gave_ops_up or isinstance(op, _SELF_STANDING)",
           "    return True",
           "an outcome decided on a memory that gave ops up is told as final (sim seeds 418, "
           "437: a grant there, refused once a repair brought the ops back)"),
    Mutant("refusal_final", "crosstalk/core/link/common.py",
           'TRANSIENT_POST_ERRORS = frozenset({"rate_limited", "backlog_full"})',
           'TRANSIENT_POST_ERRORS = frozenset({"rate_limited"})',
           "a post the relay turns away because its backlog is full is dropped, not retried"),
    Mutant("replay_pushes_live", "relay/core.py",
           "            if cid != me and conns[cid].live and f.room not in conns[cid].replay",
           "            if cid != me and conns[cid].live",
           "a live post is pushed to a device whose replay of the room has not reached it yet "
           "(ahead of the ops before it)"),
    Mutant("pairing_keys_differ", "crosstalk/features/pairing/ops.py",
           "    offer = make_offer(daemon, keys, agent=params.agent, room=grant)",
           "    offer = make_offer(daemon, keys, agent=params.agent,\n"
           "                       room=RoomGrant(grant.room_id, nacl.utils.random(32)))",
           "the inviter grants the joiner a room key other than the one it keeps"),
    Mutant("node_lost_cas_taken", "relay/node.py",
           "                if _settles(units, lost.unit):  # the request's own unit is stored",
           "                if True:  # the request's own unit is stored",
           "a relay node answers a request whose compare-and-set it lost as if it had won "
           "(an op acknowledged that the stream never stored: two relay nodes only)"),
)


def check(mutant: Mutant, root: Path = ROOT) -> str:
    """The file's text with ``mutant`` planted (raises if its text is not there exactly once)."""
    text = (root / mutant.path).read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"{mutant.name}: its text occurs {count} times in {mutant.path}")
    return text.replace(mutant.old, mutant.new)


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for tree in TREES:
        shutil.copytree(ROOT / tree, dest / tree, ignore=ignore)


def run_mutant(mutant: Mutant, seeds: int, jobs: int, start: int = 1,
               placed: bool = True) -> dict[str, object]:
    """Plant ``mutant`` in a temp copy and run the placed cases (tests/sim/placed.py; with
    ``placed``), then ``seeds`` seeds from ``start`` there; stop at the first failure."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        dest = Path(tmp)
        _copy_tree(dest)
        (dest / mutant.path).write_text(check(mutant))
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(dest))
        started = time.perf_counter()
        result = _placed(dest, env) if placed else None
        if result is None and seeds:
            result = _seeds(dest, env, seeds, start, jobs)
        result = result or {"caught": None, "where": "", "checkers": []}
        elapsed = time.perf_counter() - started
    return {"name": mutant.name, **result, "s": round(elapsed, 1)}


def _placed(dest: Path, env: dict[str, str]) -> dict[str, object] | None:
    """The first placed case that fails in ``dest``, or None if all pass."""
    out = _json(dest, env, ["-m", "tests.sim.placed", "--json", "--first-failure"])
    if "error" in out:
        return out
    for r in out["results"]:
        if r["failures"]:
            return {"caught": r["seed"], "where": f"placed case {r['case']}",
                    "checkers": sorted({f[0] for f in r["failures"]})}
    return None


def _seeds(dest: Path, env: dict[str, str], seeds: int, start: int,
           jobs: int) -> dict[str, object] | None:
    """The first of ``seeds`` seeds from ``start`` that fails in ``dest``, or None."""
    out = _json(dest, env, ["-m", "tests.sim", "--seeds", str(seeds), "--start", str(start),
                            "--jobs", str(jobs), "--until", "any", "--json"])
    if "error" in out:
        return out
    if out["caught"] is None:
        return {"caught": None, "where": "", "checkers": [], "seeds_run": len(out["results"])}
    hit = [r for r in out["results"] if r["seed"] == out["caught"]]
    return {"caught": out["caught"], "where": "",
            "checkers": sorted({f[0] for f in hit[0]["failures"]}) if hit else [],
            "seeds_run": len(out["results"])}


def _json(dest: Path, env: dict[str, str], args: list[str]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, *args], cwd=dest, env=env, capture_output=True,
                          text=True, check=False)
    if not done.stdout.strip():
        return {"caught": None, "error": done.stderr[-2000:]}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.sim.mutate")
    p.add_argument("--seeds", type=int, default=60)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--only", action="append", help="just this mutant (repeatable)")
    p.add_argument("--list", action="store_true")
    args = p.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name:26} {m.path}: {m.why}" + (" [equivalent]" if m.equivalent else ""))
        return 0
    caught = 0
    for mutant in chosen:
        r = run_mutant(mutant, args.seeds, args.jobs)
        if r["caught"] is not None:
            caught += 1
            note = " (marked equivalent: it is not)" if mutant.equivalent else ""
            where = f"{r['where']} " if r["where"] else ""
            print(f"caught   {mutant.name:26} {where}seed {r['caught']} {r['checkers']} "
                  f"({r.get('seeds_run', 0)} seeds, {r['s']} s){note}", flush=True)
        else:
            word = "equiv.  " if mutant.equivalent and not r.get("error") else "SURVIVED"
            print(f"{word} {mutant.name:26} {args.seeds} seeds pass: {mutant.why}"
                  + (f"\n{r['error']}" if r.get("error") else ""), flush=True)
    counted = [m for m in chosen if not m.equivalent]
    print(f"{caught} of {len(chosen)} mutants caught within {args.seeds} seeds "
          f"({len(chosen) - len(counted)} equivalent)")
    return 0 if caught >= len(counted) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
