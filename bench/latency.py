"""End-to-end message latency over a loopback relay with real daemons, next to the raw
trio-websocket round trip measured in the same run.

Run: ``python -m bench.latency [--quick] [--messages N] [--notices N] [--pushes N] [--json]``.

Two real daemons (own homes, own processes) are paired through the real CLI on a real relay
process. The sender's daemon gets ``send`` over its control socket, one message at a time; the
next is sent only once the previous one is held at the recipient, so nothing queues.

*send → held*: from just before the ``send`` request until the recipient's daemon commits the
message to ``held_messages``. The arrival time is the row's ``received_at``, which the
recipient's daemon stamps itself (``time.time()``, the same clock as ours on one machine) inside
the transaction that holds it. We only poll the recipient's ``state.db`` read-only to learn the
row exists; how often we poll does not enter the figure. (Timing a ``read`` instead would add
a control round trip and the poll interval to every sample.) The path: control socket → room
actor seals and commits to the outbox → relay link → relay sequences and pushes → recipient's
link → room actor opens, verifies, applies and commits.

*send → sent*: how long the ``send`` request itself takes: the outbox commit plus the relay's
``posted`` reply (the ``sent`` state).

For scale, the same run times ``fsync`` of a 4 KiB append in the recipient's home: the store
commits with ``synchronous=FULL`` (nothing acknowledged is lost), so every commit on the path
pays at least one.

*send → notice at the hook*: then, on the same two daemons, questions one at a time until the
recipient's hook program prints a notice naming the sender; see ``bench.notice`` for exactly what
that figure contains (hook process start-up and the pull, among others).

*send → pushed into a busy Claude Code session*: then, on the same two daemons, questions one at
a time until they arrive pushed, mid-turn: as the line the daemon writes into the session's
inbox socket, and as the ``notifications/claude/channel`` message a real ``crosstalk server``
(the MCP server Claude Code spawns) writes on its stdout; see ``bench.push``.

The ceiling is a sequential 200-byte round trip to a raw trio-websocket echo server in its own
process: two loopback hops, as ours has two (sender → relay → recipient).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import echo_round_trips, progress, summary_ms
from bench.notice import notice_latency, start_busy_session
from bench.push import channel_latency, inbox_latency
from crosstalk.client import call
from crosstalk.paths import Home
from crosstalk.store.ids import to_db
from tests.e2e.conftest import Person, pair, stop_pid
from tests.relay.process import RelayProcess

ARRIVAL_TIMEOUT = 30.0


def _held_at(db: Path, message_id: str, timeout: float) -> float:
    """``received_at`` of ``message_id`` in a recipient's store, polled read-only (bounded)."""
    deadline = time.monotonic() + timeout
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        while True:
            row = conn.execute(
                "SELECT received_at FROM held_messages WHERE message_id = ?", (to_db(message_id),)
            ).fetchone()
            if row is not None:
                return float(row[0])
            if time.monotonic() > deadline:
                raise TimeoutError(f"message {message_id} not held after {timeout}s")
            time.sleep(0.0005)
    finally:
        conn.close()


def fsync_times(directory: Path, count: int) -> list[float]:
    """Seconds per ``fsync`` of a fresh 4 KiB append in ``directory`` (the store's disk): the
    floor under every commit, as the store runs SQLite with ``synchronous=FULL``."""
    path = directory / "fsync-probe"
    samples = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            os.write(fd, b"x" * 4096)
            start = time.perf_counter()
            os.fsync(fd)
            samples.append(time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def measure_pair(sender: Home, recipient: Home, to: str, count: int) -> dict[str, list[float]]:
    """Send ``count`` messages one at a time; per message, (held - start) and send duration."""
    held: list[float] = []
    sent: list[float] = []
    for i in range(count):
        start_wall, start = time.time(), time.perf_counter()
        reply = call(sender, "send", {"to": to, "text": f"bench message {i}"})
        sent.append(time.perf_counter() - start)
        arrived = _held_at(recipient.database, str(reply["id"]), ARRIVAL_TIMEOUT)
        held.append(arrived - start_wall)
    return {"held": held, "sent": sent}


class TwoDaemons:
    """A relay and two paired daemons in a throwaway directory; everything stopped by pid."""

    def __init__(self, *relay_args: str) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="ctl-", dir="/tmp"))
        self.relay = RelayProcess(self.tmp / "relay", self.tmp / "relay.stderr", *relay_args)
        self.people: list[Person] = []

    def __enter__(self) -> tuple[Person, Person]:
        try:
            self.relay.start()
            url = f"ws://127.0.0.1:{self.relay.port}"
            ana, ben = Person(self.tmp / "ana", url), Person(self.tmp / "ben", url)
            self.people = [ana, ben]
            pair(ana, ben)
        except BaseException:
            self.__exit__()
            raise
        return ana, ben

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:  # failing: leave the evidence in our stderr
            for person in self.people:
                print(f"--- {person.home.name} daemon.log\n{person.log_tail(40)}", file=sys.stderr)
            with contextlib.suppress(OSError):
                print(f"--- relay stderr\n{self.relay.stderr_path.read_text()[-3000:]}",
                      file=sys.stderr)
        for person in self.people:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        self.relay.kill(signal.SIGTERM)
        shutil.rmtree(self.tmp, ignore_errors=True)


def run(quick: bool, messages: int | None = None, notices: int | None = None,
        pushes: int | None = None) -> dict[str, Any]:
    """Measure; return a JSON-ready dict of summaries in milliseconds."""
    count = messages or (10 if quick else 200)
    notice_count = notices or (3 if quick else 40)
    push_count = pushes or (3 if quick else 40)
    load_before = round(os.getloadavg()[0], 2)  # the machine is shared: say how busy it was
    echo = echo_round_trips(count * 5)
    with TwoDaemons() as (ana, ben):
        a, b = Home.resolve(str(ana.home)), Home.resolve(str(ben.home))
        measure_pair(a, b, "ben", 3)  # warm-up: imports, first statements, caches
        progress(f"send → held, {count} messages")
        timed = measure_pair(a, b, "ben", count)
        fsync = fsync_times(b.root, 50 if quick else 300)
        progress(f"send → notice at the hook, {notice_count} messages")
        project = ana.home.parent / "proj"
        project.mkdir()
        start_busy_session(b, project)
        hooked = notice_latency(a, b, "ben", ana.home.name, notice_count, project)
        progress(f"send → channel notification, {push_count} messages")
        channel = channel_latency(a, b, "ben", push_count, project)
        progress(f"send → inbox socket, {push_count} messages")
        inbox = inbox_latency(a, b, "ben", ana.home.name, push_count, project)
    return {
        "messages": count,
        "send_to_held": summary_ms(timed["held"]),
        "send_to_sent": summary_ms(timed["sent"]),
        "ws_echo_round_trip": summary_ms(echo),
        "fsync_4k": summary_ms(fsync),
        "notices": notice_count,
        "send_to_notice_surfaced": summary_ms(hooked["surfaced"]),
        "send_to_hook_printed": summary_ms(hooked["printed"]),
        "notice_hook_run": summary_ms(hooked["last_run"]),
        "hook_runs_per_notice": {"mean": round(sum(hooked["runs"]) / notice_count, 2),
                                 "max": max(hooked["runs"])},
        "pushes": push_count,
        "send_to_inbox_pushed": summary_ms(inbox["pushed"]),
        "send_to_inbox_surfaced": summary_ms(inbox["surfaced"]),
        "send_to_channel_pushed": summary_ms(channel["pushed"]),
        "send_to_channel_surfaced": summary_ms(channel["surfaced"]),
        "held_samples_ms": [round(s * 1000, 3) for s in timed["held"]],
        "echo_samples_ms": [round(s * 1000, 3) for s in echo],
        "hook_samples_ms": [round(s * 1000, 3) for s in hooked["printed"]],
        "inbox_samples_ms": [round(s * 1000, 3) for s in inbox["pushed"]],
        "channel_samples_ms": [round(s * 1000, 3) for s in channel["pushed"]],
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few messages, for smoke runs")
    parser.add_argument("--messages", type=int, default=None, help="send → held samples")
    parser.add_argument("--notices", type=int, default=None, help="send → hook samples")
    parser.add_argument("--pushes", type=int, default=None,
                        help="send → inbox socket and send → channel samples (each)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.quick, args.messages, args.notices, args.pushes)
    if args.json:
        print(json.dumps(result))
        return
    for name in ("send_to_held", "send_to_sent", "send_to_notice_surfaced",
                 "send_to_hook_printed", "notice_hook_run", "send_to_inbox_pushed",
                 "send_to_channel_pushed", "ws_echo_round_trip", "fsync_4k"):
        figures = result[name]
        print(f"{name}: p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms "
              f"over {figures['n']:.0f}")


if __name__ == "__main__":
    main()
