"""A/B of two source trees on one machine, in the same run: send → held and send → visible.

Run: ``python -m bench.two_trees --base DIR [--messages N] [--json]``, where ``DIR`` holds the
code to compare against (e.g. ``git archive 84f5a6a | tar -x -C DIR``); the other side is the
tree this module is imported from (``PYTHONPATH``).

Two relays and two pairs of real daemons (``bench.latency.TwoDaemons``): the first pair is
started with ``PYTHONPATH=DIR`` (its CLI and the daemons it starts import the base tree), the
second with this tree. Messages go alternately to one pair and the other (A B, then B A), one at
a time, so both sides see the same machine. Per message:

*send → held*: as ``bench.latency`` reports it, the ``received_at`` stamp the recipient's room
actor takes inside its apply transaction (before that transaction's commit).

*send → visible*: when a read-only poll (every 0.2 ms) of the recipient's ``state.db`` first sees
the held row, i.e. after the room's commit: what a commit's fsync adds shows here.

*CPU per message*: user + system time of each side's two daemons (/proc) over the timed
messages, divided by their number: the processes' own work, which a loaded machine stretches in
wall time far more than in CPU time.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from typing import Any

from bench._common import cpu_seconds
from bench.latency import ARRIVAL_TIMEOUT, TwoDaemons
from crosstalk.client import call, daemon_pid
from crosstalk.paths import Home
from crosstalk.store.ids import to_db

SIDES = ("base", "this")
POLL_S = 0.0002


def one_message(sender: Home, recipient: Home, i: int) -> tuple[float, float]:
    """Seconds from the ``send`` call to the held stamp and to the row being visible."""
    conn = sqlite3.connect(f"file:{recipient.database}?mode=ro", uri=True, timeout=5.0)
    try:
        call_at = time.time()
        reply = call(sender, "send", {"to": "ben", "text": f"two trees {i:04d} " + "x" * 150})
        deadline = time.monotonic() + ARRIVAL_TIMEOUT
        while True:
            row = conn.execute("SELECT received_at FROM held_messages WHERE message_id = ?",
                               (to_db(str(reply["id"])),)).fetchone()
            if row is not None:
                return float(row[0]) - call_at, time.time() - call_at
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {reply['id']} was not held in {ARRIVAL_TIMEOUT} s")
            time.sleep(POLL_S)
    finally:
        conn.close()


def _cpu(pids: list[int | None]) -> list[float]:
    """CPU seconds (user + system) of each daemon so far (0 for one not running)."""
    return [cpu_seconds(pid) if pid else 0.0 for pid in pids]


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(s * 1000 for s in samples)
    return {"p50": round(statistics.median(ordered), 3),
            "p90": round(ordered[int(len(ordered) * 0.9)], 3),
            "p99": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 3)}


def run(base: str, count: int) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    here = os.environ.get("PYTHONPATH", "")
    setups = {"base": TwoDaemons(), "this": TwoDaemons()}
    homes: dict[str, tuple[Home, Home]] = {}
    try:
        for side in SIDES:
            os.environ["PYTHONPATH"] = base if side == "base" else here
            ana, ben = setups[side].__enter__()
            homes[side] = (Home.resolve(str(ana.home)), Home.resolve(str(ben.home)))
        os.environ["PYTHONPATH"] = here
        samples: dict[str, list[tuple[float, float]]] = {side: [] for side in SIDES}
        for side in SIDES:
            for i in range(5):  # warm-up: imports, first statements, caches
                one_message(*homes[side], i)
        pids = {side: [daemon_pid(home) for home in homes[side]] for side in SIDES}
        cpu_before = {side: _cpu(pids[side]) for side in SIDES}
        for i in range(count):
            for side in SIDES if i % 2 == 0 else SIDES[::-1]:
                samples[side].append(one_message(*homes[side], 100 + i))
        cpu = {side: [round((after - was) * 1000 / count, 3) for after, was
                      in zip(_cpu(pids[side]), cpu_before[side], strict=True)] for side in SIDES}
    finally:
        os.environ["PYTHONPATH"] = here
        for setup in setups.values():
            setup.__exit__(None, None, None)
    result: dict[str, Any] = {"messages": count, "load_before": load_before,
                              "load_after": os.getloadavg()[0]}
    for side in SIDES:
        result[side] = {"send_to_held": _summary([s[0] for s in samples[side]]),
                        "send_to_visible": _summary([s[1] for s in samples[side]]),
                        "cpu_ms_per_message": dict(zip(("sender", "recipient"), cpu[side],
                                                       strict=True))}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.base, args.messages)
    if args.json:
        print(json.dumps(result))
        return
    for side in SIDES:
        held, seen = result[side]["send_to_held"], result[side]["send_to_visible"]
        cpu = result[side]["cpu_ms_per_message"]
        print(f"{side}: send → held p50 {held['p50']} ms p90 {held['p90']} ms "
              f"p99 {held['p99']} ms; send → visible p50 {seen['p50']} ms p90 {seen['p90']} ms; "
              f"CPU per message: sender's daemon {cpu['sender']} ms, recipient's "
              f"{cpu['recipient']} ms", file=sys.stdout)
    print(f"load average (1 min) {result['load_before']:.2f} before, "
          f"{result['load_after']:.2f} after", file=sys.stdout)


if __name__ == "__main__":
    main()
