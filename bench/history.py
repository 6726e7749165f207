"""Flat in history: send, read, hook and status after 0, 10,000 and 50,000 messages.

Run: ``python -m bench.history [--quick] [--sizes N...] [--rounds N] [--json]``.

Two real daemons paired through a real relay process; Ana sends to Ben. At each point, ``rounds``
times: Ana's control-socket ``send`` (its reply), Ben's ``read`` of what arrived and its
``ack`` (marking it read, which sends the read receipt), one ``UserPromptSubmit`` hook
conversation for Ben's busy Claude Code session (``crosstalk.hook.main.run`` in this process,
so interpreter start-up, the same at every point, does not dilute the ratio), and Ben's
``status``. Each figure is divided by the same figure at 0 messages, measured in the same run.

Each size has its own relay and pair, all running at once, and the rounds go round the pairs in
turn: a machine that speeds up or slows down during the run (shared machines do, by half and
more within a minute) then moves every size alike instead of whichever was measured last.

A pair's history is given while its daemons are stopped (by pid): the rows its warm-up's real
messages left in every table (held messages, notices, the attention record, inbound ops, outbox,
sent messages) copied under new ids, read and finished and a day old, as a long-running pair
would have them; then the daemons start again. Copying real rows keeps their shapes and sizes,
so bytes on disk per message are ``state.db`` growth over the copies. Daemon RSS is Ben's after
the rounds. Sending 50,000 messages for real would take over ten minutes at the loop's pace; the
history is what is measured here, not the sending.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._common import progress, rss_kib, summary_ms
from bench.latency import TwoDaemons, _held_at
from bench.notice import SESSION, start_busy_session
from crosstalk.client import call, daemon_pid, start_daemon
from crosstalk.hook import main as hook_main
from crosstalk.paths import Home
from crosstalk.store.ids import to_db
from crosstalk.store.schema_compact import NEXT_HELD_ROWID
from tests.e2e.conftest import stop_pid

#: Per table: the column made unique in each copy, and columns cleared or negated.
COPIED = {
    "held_messages": ("message_id", (), ()),
    "notices": ("message_id", ("id",), ()),
    "attention_record": ("item", ("id",), ()),
    "relay_inbound": ("op_id", (), ("seq",)),
    "outbox": ("op_id", ("id",), ("seq",)),
    "sent_messages": ("msg_id", (), ()),
}
#: Tables whose key the store keeps as a blob (crosstalk/store/ids.py).
BLOB_IDS = {"held_messages", "notices", "attention_record"}
DAY = 86400.0
PATHS = ("send", "read", "hook", "status")


def _disk_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*") if p.is_file())


def seed(db: Path, start: int, count: int) -> None:
    """Copy the template rows of every table in :data:`COPIED` ``count`` times (ids from
    ``start``), a day old and finished; ``db``'s daemon must be stopped."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        for table, (key, cleared, negated) in COPIED.items():
            cursor = conn.execute(f"SELECT * FROM {table} ORDER BY rowid DESC LIMIT 3")
            names = [d[0] for d in cursor.description]
            templates = cursor.fetchall()
            if not templates:
                continue
            rows = []
            # Held rowids come from the search index's counter (store/schema_compact.py).
            next_held = conn.execute(f"SELECT {NEXT_HELD_ROWID}").fetchone()[0]
            for n in range(start, start + count):
                row = dict(zip(names, templates[n % len(templates)], strict=True))
                row[key] = to_db(f"{n:032x}") if table in BLOB_IDS else f"{n:032x}"
                if table == "held_messages":
                    row["rowid"] = next_held + n - start
                for name in cleared:
                    row[name] = None
                for name in negated:
                    row[name] = -n - 1 if row[name] is not None else None
                for name, value in row.items():
                    if name.endswith(("_at", "ts")) and isinstance(value, float):
                        row[name] = value - DAY
                rows.append(tuple(row.values()))
            columns = [*names, "rowid"] if table == "held_messages" else names
            marks = ", ".join("?" for _ in columns)
            conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def _hook(home: Home, project: Path) -> float:
    stdin = json.dumps({"hook_event_name": "UserPromptSubmit", "session_id": SESSION,
                        "cwd": str(project)})
    os.environ["CROSSTALK_HOME"] = str(home.root)
    start = time.perf_counter()
    text, status = hook_main.run(["--client", "claude", "UserPromptSubmit"], time.monotonic(),
                                 stdin)
    elapsed = time.perf_counter() - start
    if status != 0 or not text.startswith("{"):
        raise RuntimeError(f"hook failed: {status} {text[:200]!r}")
    return elapsed


@dataclass
class Point:
    """One size's pair, and what was measured on it."""

    size: int
    a: Home
    b: Home
    project: Path
    per_message: float | None = None
    samples: dict[str, list[float]] = field(
        default_factory=lambda: {path: [] for path in PATHS})

    def round(self, i: int) -> None:
        """One sample of every path."""
        start = time.perf_counter()
        reply = call(self.a, "send", {"to": "ben", "text": f"history bench {i}"})
        self.samples["send"].append(time.perf_counter() - start)
        _held_at(self.b.database, str(reply["id"]), 30.0)
        start = time.perf_counter()
        lease = call(self.b, "read", {})["lease"]
        call(self.b, "ack", {"lease": lease})
        self.samples["read"].append(time.perf_counter() - start)
        self.samples["hook"].append(_hook(self.b, self.project))
        start = time.perf_counter()
        call(self.b, "status", {})
        self.samples["status"].append(time.perf_counter() - start)

    def warm(self, rounds: int) -> None:
        """Rounds not kept: imports, first statements, caches."""
        for i in range(rounds):
            self.round(-i - 1)
        for path in PATHS:
            self.samples[path].clear()


def restart_with_history(homes: list[Home], count: int) -> float | None:
    """Stop both daemons by pid, seed ``count`` messages of history, start them; bytes added
    to Ben's store per message."""
    for home in homes:
        pid = daemon_pid(home)
        if pid:
            stop_pid(pid)
    before = _disk_bytes(homes[1].database)
    if count:
        for home in homes:
            seed(home.database, 0, count)
    per_message = (_disk_bytes(homes[1].database) - before) / count if count else None
    for home in homes:
        start_daemon(home)
    return per_message


def _start_point(stack: contextlib.ExitStack, size: int) -> Point:
    ana, ben = stack.enter_context(TwoDaemons())
    a, b = Home.resolve(str(ana.home)), Home.resolve(str(ben.home))
    project = ana.home.parent / "proj"
    project.mkdir()
    start_busy_session(b, project)
    point = Point(size, a, b, project)
    point.warm(5)  # also the rows history is copied from
    if size:
        progress(f"seeding history to {size:,} messages")
    # Every size restarts, none seeded included, so that all daemons are alike in age.
    os.environ["CROSSTALK_RELAY"] = ana.relay
    point.per_message = restart_with_history([a, b], size)
    point.warm(2)  # first statements after a restart
    return point


def run(sizes: list[int], rounds: int) -> dict[str, Any]:
    """Measure every path at every size, the sizes' rounds interleaved; figures and ratios to
    the first size."""
    with contextlib.ExitStack() as stack:
        live = [_start_point(stack, size) for size in sizes]
        progress(f"{rounds} rounds at each of {', '.join(f'{s:,}' for s in sizes)} messages, "
                 "taking the sizes in turn")
        for i in range(rounds):
            for k in range(len(live)):  # a different size goes first each round
                live[(i + k) % len(live)].round(i)
        points: list[dict[str, Any]] = []
        for point in live:
            pid = daemon_pid(point.b)
            points.append({
                "messages": point.size,
                **{path: summary_ms(point.samples[path]) for path in PATHS},
                "rss_mib": round(rss_kib(pid) / 1024, 1) if pid else None,
                "disk_bytes_per_message":
                    round(point.per_message) if point.per_message else None,
                "db_mib": round(_disk_bytes(point.b.database) / 2**20, 1),
            })
    base = points[0]
    for entry in points:
        entry["ratio"] = {
            path: round(entry[path]["p50_ms"] / base[path]["p50_ms"], 2) for path in PATHS
        }
    return {"rounds": rounds, "points": points}


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small histories, for smoke runs")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # A smoke run needs one history beside the fresh pair, not two: each size is a relay and a
    # pair of daemons of its own, started one after another.
    sizes = args.sizes or ([0, 200] if args.quick else [0, 10_000, 50_000])
    result = run(sizes, args.rounds or (3 if args.quick else 30))
    if args.json:
        print(json.dumps(result))
        return
    for point in result["points"]:
        print(point["messages"], {p: point[p]["p50_ms"] for p in PATHS}, point["ratio"],
              point["rss_mib"], point["disk_bytes_per_message"])


if __name__ == "__main__":
    main()
