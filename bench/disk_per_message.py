"""Bytes of ``state.db`` per message, and how ``state.db`` grows over a soak, with real daemons.

Run: ``python -m bench.disk_per_message [--quick] [--messages N] [--json]`` and
``python -m bench.disk_per_message --soak [--seconds S] [--people N] [--rate R] [--json]``.

*Per message*: two real daemons (own homes, own processes) paired through the real CLI on a real
relay process. The sender sends ``N`` messages of exactly 200 characters over its control socket;
we wait (bounded) until the last one is held at the recipient and the relay link's copies of the
sealed ops are trimmed (the outbox and ``relay_inbound`` hold at most one row each: see
crosstalk/store/retention.py ``trim``, every 2 heartbeats: 10 s by default, 2 s with
``--quick``, which runs the daemons with a 1 s heartbeat), then checkpoint each ``state.db``
(``wal_checkpoint(TRUNCATE)``, so the WAL is inside the file) and read the bytes of its pages in
use: ``(page_count - freelist_count) * page_size``. A free page is not counted: the next inserts
reuse it, so it is not growth. The recipient answers once before each measurement (room memory
passes the sender's own posts at the room's next op, and only then may their rows go): one short
message more on each side, under 1% of the figure. Figure: (after - before) / N, for the sender
and the recipient, next to the raw payload (200 bytes) in the same run; the search index is
counted (it is in the file), and so is every table and index, listed per table with ``dbstat``.

*Soak*: ``--people`` daemons (default 4) in one shared room, paired in a line like a team; each
sends to the room in turn, ``--rate`` messages a second in all, for ``--seconds``. Every 15 s we
checkpoint each ``state.db`` and record its file size and the rows of its outbox and
``relay_inbound``. Without the trim the outbox grew by one row per message sent, for ever; with
it, the file grows only with what must be kept (messages held and sent, the search index).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench._common import progress
from bench.latency import TwoDaemons, _held_at
from crosstalk.client import call
from crosstalk.paths import HEARTBEAT_ENV, Home
from tests.e2e.conftest import Person, pair
from tests.e2e.test_rooms_many import _stop_daemons_under, everyone, join, wait_rosters
from tests.relay.process import RelayProcess

PAYLOAD = 200
#: Seconds to wait for the trim after the last message (a few trim periods at the 5 s heartbeat).
TRIM_WAIT = 60.0
SOAK_SAMPLE = 15.0
ROOM = "soak"


def text_of(i: int) -> str:
    """Message ``i``: exactly :data:`PAYLOAD` characters of words, each message different."""
    words = f"message {i} " + "the relay sequenced it and every member holds it now " * 5
    return words[:PAYLOAD]


def in_use(db: Path) -> int:
    """Bytes of the pages ``db`` uses, after a checkpoint that empties its WAL into it."""
    conn = sqlite3.connect(db, timeout=10.0)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, free, size = (conn.execute(f"PRAGMA {p}").fetchone()[0]
                             for p in ("page_count", "freelist_count", "page_size"))
        return int((pages - free) * size)
    finally:
        conn.close()


def by_table(db: Path) -> dict[str, int]:
    """Bytes per table and index (``dbstat``), the largest first."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0)
    try:
        rows = conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
        ).fetchall()
        return {str(name): int(size) for name, size in rows}
    finally:
        conn.close()


def link_rows(db: Path) -> tuple[int, int]:
    """Rows in the outbox and in ``relay_inbound``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0)
    try:
        return (int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0]),
                int(conn.execute("SELECT count(*) FROM relay_inbound").fetchone()[0]))
    finally:
        conn.close()


def wait_trimmed(sender: Path, recipient: Path, timeout: float) -> float | None:
    """Seconds until both link tables hold at most one row; None if they still held more after
    ``timeout`` (a crosstalk without the trim: the figure then counts them)."""
    start = time.monotonic()
    while link_rows(sender)[0] > 1 or link_rows(recipient)[1] > 1:
        if time.monotonic() - start > timeout:
            return None
        time.sleep(0.5)
    return round(time.monotonic() - start, 1)


def growth(before: dict[str, int], after: dict[str, int], count: int) -> dict[str, float]:
    """Bytes per message by table, for the tables that grew."""
    grown = {k: (after.get(k, 0) - before.get(k, 0)) / count for k in after}
    return {k: round(v, 1) for k, v in sorted(grown.items(), key=lambda kv: -kv[1]) if v > 0}


def per_message(count: int) -> dict[str, Any]:
    """Send ``count`` 200-character messages; bytes of each side's ``state.db`` per message."""
    with TwoDaemons() as (ana, ben):
        a, b = Home.resolve(str(ana.home)), Home.resolve(str(ben.home))
        for i in range(3):  # warm-up: the first message creates rows every later one reuses
            call(a, "send", {"to": "ben", "text": text_of(-i)})
        call(b, "send", {"to": "ana", "text": "ok"})
        wait_trimmed(a.database, b.database, TRIM_WAIT)
        before = {"sender": in_use(a.database), "recipient": in_use(b.database)}
        tables = {"sender": by_table(a.database), "recipient": by_table(b.database)}
        progress(f"sending {count} messages of {PAYLOAD} characters")
        last = ""
        for i in range(count):
            last = str(call(a, "send", {"to": "ben", "text": text_of(i)})["id"])
        _held_at(b.database, last, 60.0)
        # Room memory passes our own posts at the room's next op: the recipient answers once.
        call(b, "send", {"to": "ana", "text": "ok"})
        progress("waiting for the trim of the link's copies")
        waited = wait_trimmed(a.database, b.database, TRIM_WAIT)
        after = {"sender": in_use(a.database), "recipient": in_use(b.database)}
        result: dict[str, Any] = {"messages": count, "payload_bytes": PAYLOAD,
                                  "trim_wait_s": waited,
                                  "link_rows_after": [link_rows(a.database),
                                                      link_rows(b.database)]}
        for side, db in (("sender", a.database), ("recipient", b.database)):
            result[f"{side}_bytes_per_message"] = round((after[side] - before[side]) / count, 1)
            result[f"{side}_by_table"] = growth(tables[side], by_table(db), count)
        return result


def markdown(result: dict[str, Any]) -> str:
    """The page's section (``python -m bench`` shows it under its own heading)."""
    rows = []
    for side in ("sender", "recipient"):
        per = float(result[f"{side}_bytes_per_message"])
        largest = ", ".join(f"`{name}` {size:.0f}"
                            for name, size in list(result[f"{side}_by_table"].items())[:4])
        rows.append(f"| {side} | {per:,.0f} B | {per / PAYLOAD:.1f}× | {largest} |")
    return (
        f"{result['messages']} messages of {PAYLOAD} characters between two real daemons; "
        "bytes of `state.db` pages in use per message after a checkpoint, search index "
        "included, once the link's copies are trimmed.\n\n"
        "| side | bytes per message | ÷ payload | largest parts (bytes per message) |\n"
        "|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
        "Reproduce: `python3 -m bench --only disk_per_message`; the soak: "
        "`python3 -m bench.disk_per_message --soak --seconds 600`.\n"
    )


@contextlib.contextmanager
def team(root: Path, size: int) -> Iterator[list[Person]]:
    """A relay and ``size`` daemons in one room, paired in a line; all stopped by pid."""
    relay = RelayProcess(root / "relay", root / "relay.stderr")
    relay.start()
    try:
        url = f"ws://127.0.0.1:{relay.port}"
        people = [Person(root / f"p{i}", url) for i in range(size)]
        for a, b in itertools.pairwise(people):
            pair(a, b)
        people[0].json("room", "create", ROOM)
        for a, b in itertools.pairwise(people):
            join(a, b, ROOM)
        wait_rosters(people, ROOM, everyone([p.home.name for p in people]), timeout=120.0)
        yield people
    finally:
        _stop_daemons_under(root)
        relay.kill(signal.SIGTERM)


def sample(homes: list[Home], started: float, sent: int) -> dict[str, Any]:
    """One point of the soak: per daemon, file bytes after a checkpoint and link rows."""
    point: dict[str, Any] = {"t_s": round(time.monotonic() - started, 1), "sent": sent}
    sizes, outbox, inbound = [], [], []
    for home in homes:
        in_use(home.database)  # the checkpoint: the file then holds everything
        sizes.append(home.database.stat().st_size)
        rows = link_rows(home.database)
        outbox.append(rows[0])
        inbound.append(rows[1])
    point.update(file_bytes=sizes, outbox_rows=outbox, inbound_rows=inbound)
    return point


def soak(seconds: float, size: int, rate: float) -> dict[str, Any]:
    """``size`` daemons in a room sending ``rate`` messages a second for ``seconds``."""
    root = Path(tempfile.mkdtemp(prefix="ctd-", dir="/tmp"))
    try:
        with team(root, size) as people:
            homes = [Home.resolve(str(p.home)) for p in people]
            progress(f"soak: {size} daemons, {rate} messages/s, {seconds:.0f} s")
            started = time.monotonic()
            points = [sample(homes, started, 0)]
            sent, next_sample = 0, started + SOAK_SAMPLE
            while time.monotonic() - started < seconds:
                call(homes[sent % size], "send", {"to": f"#{ROOM}", "text": text_of(sent)})
                sent += 1
                time.sleep(max(0.0, started + sent / rate - time.monotonic()))
                if time.monotonic() >= next_sample:
                    points.append(sample(homes, started, sent))
                    next_sample += SOAK_SAMPLE
                    progress(f"soak: {sent} sent, outbox rows {points[-1]['outbox_rows']}")
            points.append(sample(homes, started, sent))
        return {"seconds": seconds, "people": size, "rate": rate, "sent": sent,
                "payload_bytes": PAYLOAD, "points": points}
    finally:
        _stop_daemons_under(root)
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few messages, for smoke runs")
    parser.add_argument("--messages", type=int, default=None, help="messages measured")
    parser.add_argument("--soak", action="store_true", help="a room sending for --seconds")
    parser.add_argument("--seconds", type=float, default=600.0, help="soak duration")
    parser.add_argument("--people", type=int, default=4, help="soak: daemons in the room")
    parser.add_argument("--rate", type=float, default=4.0, help="soak: messages a second")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick:  # the trim runs every 2 heartbeats: 2 s, not 10 s, so a smoke run is short
        os.environ.setdefault(HEARTBEAT_ENV, "1")
    if args.soak:
        result = soak(args.seconds, args.people, args.rate)
    else:
        result = per_message(args.messages or (20 if args.quick else 300))
        result["markdown"] = markdown(result)
    if args.json:
        print(json.dumps(result))
        return
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
