"""Where the time of one message goes: a per-stage timeline of send → held, from the stamps the
path itself commits.

Run: ``python -m bench.timeline [--quick] [--messages N] [--json]``.

Two real daemons paired through a real relay process (``bench.latency.TwoDaemons``); Ana sends
to Ben over her control socket, one message at a time, the next once the previous one is held
and decided at Ben's. Every stage boundary below is a wall-clock stamp that a component takes
for its own reasons (the same clock on one machine), read back afterwards from the stores, so
nothing is instrumented and no stage is slowed by being watched:

=======================  ========================================================================
stamp                    taken by
=======================  ========================================================================
``call``                 this process, just before the control-socket ``send``
``outbox``               Ana's daemon, ``outbox.created_at``: the sealed op enters the outbox
                         transaction (control socket, parse, route, seal are before it)
``relay``                the relay, the op's ``ts``: it gives the op its seq (the outbox
                         commit, the link's write and the relay's read are before it)
``inbound``              Ben's daemon, ``relay_inbound.received_at``: the op enters the
                         inbound transaction (the relay's commit and push, Ben's link read)
``held``                 Ben's daemon, ``held_messages.received_at``: the room's actor, rung
                         by the link, opens, verifies and applies the op in its own
                         transaction, after the link's inbound commit (crosstalk/actors/room.py)
``decided``              Ben's gate, ``notices.created_at``: its triage, an applier in the same
                         inbound transaction, after the message is held
``reply``                this process, when ``send`` answered (Ana's ``sent``: the relay's
                         ``posted`` came back)
=======================  ========================================================================

Each stage is the difference of two consecutive stamps, per message; the table gives p50 and
p90 over the messages, and the share of the p50 sum. The same run also times, in this process,
what the stages contain that can be timed alone: one ``fsync`` of a 4 KiB append in Ben's home
(every commit pays at least one: ``synchronous=FULL``), one WAL commit of a 200-byte row as the
store makes it, a raw trio-websocket round trip (two loopback hops), sealing a 200-byte op (sign,
encrypt) and opening it (decrypt, verify), so the table shows how much of a stage is work and how
much is waiting (actor hand-offs, the next transaction, other processes' commits on the disk).
The round trip plus three commits (Ana's outbox, the relay's, Ben's) is the floor of the path.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from bench import cpu_profile
from bench._common import commit_times, cpu_seconds, echo_round_trips, percentile, progress
from bench.latency import ARRIVAL_TIMEOUT, TwoDaemons, fsync_times
from crosstalk.client import call
from crosstalk.crypto import Keys, open_op, seal_op
from crosstalk.paths import Home
from crosstalk.store.ids import to_db

STAMPS = ("call", "outbox", "relay", "inbound", "held", "decided")
STAGES = {
    "call→outbox": "control socket, parse, route, seal; into the outbox transaction",
    "outbox→relay": "outbox commit, the link's write, the relay reads and sequences",
    "relay→inbound": "the relay's commit and push, the recipient link's read",
    "inbound→held": "open, verify, apply, in the link's inbound transaction",
    "held→decided": "the gate's triage, in the same inbound transaction",
}


def _one(db: Path, sql: str, key: str | bytes, timeout: float) -> float:
    """The first column of ``sql`` for ``key`` in ``db``, polled read-only until it exists."""
    deadline = time.monotonic() + timeout
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        while True:
            row = conn.execute(sql, (key,)).fetchone()
            if row is not None and row[0] is not None:
                return float(row[0])
            if time.monotonic() > deadline:
                raise TimeoutError(f"{key!r}: no row for {sql!r} after {timeout}s")
            time.sleep(0.0005)
    finally:
        conn.close()


def one_message(sender: Home, recipient: Home, i: int) -> dict[str, float]:
    """Send one message and collect its stamps (seconds, wall clock)."""
    call_at = time.time()
    reply = call(sender, "send", {"to": "ben", "text": f"timeline message {i:04d} " + "x" * 150})
    reply_at = time.time()
    msg = str(reply["id"])
    stamps = {"call": call_at}
    stamps["decided"] = _one(recipient.database,
                             "SELECT created_at FROM notices WHERE message_id = ?", to_db(msg),
                             ARRIVAL_TIMEOUT)
    stamps["held"] = _one(recipient.database,
                          "SELECT received_at FROM held_messages WHERE message_id = ?", to_db(msg),
                          5.0)
    stamps["inbound"] = _one(recipient.database,
                             "SELECT received_at FROM relay_inbound WHERE op_id = ?", msg, 5.0)
    stamps["relay"] = _one(recipient.database,
                           "SELECT relay_ts FROM relay_inbound WHERE op_id = ?", msg, 5.0)
    stamps["outbox"] = _one(sender.database,
                            "SELECT created_at FROM outbox WHERE op_id = ?", msg, 5.0)
    stamps["reply"] = reply_at
    return stamps



def crypto_costs(count: int) -> dict[str, list[float]]:
    """Seconds to seal and to open (decrypt and verify) a 200-byte op, ``count`` times."""
    keys = Keys(ed_seed=os.urandom(32), x_secret=os.urandom(32))
    key, plaintext = os.urandom(32), b"x" * 200
    seal: list[float] = []
    opened: list[float] = []
    for n in range(count):
        op_id = f"{n:032x}"
        start = time.perf_counter()
        sealed = seal_op(keys, key, plaintext, room_id="r", epoch=1, op_id=op_id,
                         nonce=os.urandom(24))
        seal.append(time.perf_counter() - start)
        start = time.perf_counter()
        open_op(key, sealed, sender_ed_pub=keys.ed_pub, room_id="r", epoch=1, op_id=op_id)
        opened.append(time.perf_counter() - start)
    return {"seal": seal, "open_verify": opened}


def _ms(samples: list[float], q: float) -> float:
    return round(percentile(samples, q) * 1000, 3)


def run(count: int) -> dict[str, Any]:
    """Measure ``count`` messages (after a warm-up); stage figures in milliseconds."""
    load_before = round(os.getloadavg()[0], 2)
    daemons = TwoDaemons()
    with daemons as (ana, ben):
        a, b = Home.resolve(str(ana.home)), Home.resolve(str(ben.home))
        for i in range(3):  # warm-up: imports, first statements, caches
            one_message(a, b, -1 - i)
        progress(f"timeline of {count} messages")
        pids = {"sender": ana.daemon_pid(), "relay": daemons.relay.proc.pid,
                "recipient": ben.daemon_pid()}
        cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items() if pid}
        started = time.monotonic()
        messages = [one_message(a, b, i) for i in range(count)]
        loop_ms = (time.monotonic() - started) * 1000 / count
        cpu = {name: (cpu_seconds(pids[name]) - was) * 1000 / count
               for name, was in cpu_before.items()}
        profile = _profile({name: pid for name, pid in pids.items() if pid}, a, b, count)
        fsyncs = fsync_times(b.root, 50)
        commits = commit_times(b.root, 50)
        echo = echo_round_trips(100)
    stages: dict[str, dict[str, float]] = {}
    for first, second in itertools.pairwise(STAMPS):
        samples = [m[second] - m[first] for m in messages]
        stages[f"{first}→{second}"] = {"p50_ms": _ms(samples, 0.5), "p90_ms": _ms(samples, 0.9)}
    total = [m["decided"] - m["call"] for m in messages]
    held = [m["held"] - m["call"] for m in messages]
    sent = [m["reply"] - m["call"] for m in messages]
    crypto = crypto_costs(200)
    return {
        "messages": count,
        "stages": stages,
        "send_to_held": {"p50_ms": _ms(held, 0.5), "p90_ms": _ms(held, 0.9)},
        "send_to_decided": {"p50_ms": _ms(total, 0.5), "p90_ms": _ms(total, 0.9)},
        "send_reply": {"p50_ms": _ms(sent, 0.5), "p90_ms": _ms(sent, 0.9)},
        "cpu_ms_per_message": cpu,
        "cpu_profile": profile,
        "loop_ms_per_message": loop_ms,
        "alone": {
            "fsync_4k": {"p50_ms": _ms(fsyncs, 0.5)},
            "wal_commit": {"p50_ms": _ms(commits, 0.5)},
            "ws_echo": {"p50_ms": _ms(echo, 0.5)},
            "seal_200b": {"p50_ms": _ms(crypto["seal"], 0.5)},
            "open_verify_200b": {"p50_ms": _ms(crypto["open_verify"], 0.5)},
        },
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
    }


def _profile(pids: dict[str, int], sender: Home, recipient: Home, count: int
             ) -> dict[str, dict[str, float]]:
    """Each process's CPU by kind of work (bench/cpu_profile.py), over ``count`` more messages
    sent under py-spy after the timed ones; empty without py-spy."""
    if not cpu_profile.available():
        return {}
    progress(f"where the CPU goes: {count} more messages under py-spy")
    with cpu_profile.sampled(pids) as samples:
        for i in range(count):
            one_message(sender, recipient, 100_000 + i)
    return {name: cpu_profile.shares(bins) for name, bins in samples.items()}


def _profile_table(result: dict[str, Any]) -> str:
    """Per kind of work, the CPU per message it took in each process (its share of the samples
    times that process's measured CPU per message)."""
    profile, cpu = result.get("cpu_profile") or {}, result.get("cpu_ms_per_message") or {}
    names = [n for n in ("sender", "relay", "recipient") if profile.get(n) and n in cpu]
    if not names:
        return ""
    bins = [b for b, _ in cpu_profile.BINS] + [cpu_profile.OTHER]
    heads = {"sender": "Ana's daemon", "relay": "the relay", "recipient": "Ben's daemon"}
    rows = ["| CPU per message, by kind of work | " + " | ".join(heads[n] for n in names) + " |",
            "|---|" + "---|" * len(names)]
    for kind in bins:
        cells = [f"{profile[n].get(kind, 0.0) * cpu[n]:.2f} ms ({profile[n].get(kind, 0.0):.0%})"
                 for n in names]
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    rows.append("| **all (measured, /proc)** | " + " | ".join(f"{cpu[n]:.2f} ms" for n in names)
                + " |")
    return "\n".join([
        "", *rows, "",
        "Where that CPU goes: py-spy sampled the thread holding the GIL in each process while "
        "the same number of messages again went through, after the timed ones "
        "(`bench/cpu_profile.py`); each sample is binned by its innermost frame that names a "
        "kind of work, and a bin's share of the samples is applied to the CPU per message "
        "measured above. Crypto, SQLite, encoding and the sockets are the work any design "
        "pays; trio's scheduling and our actors' own code are the hand-offs between actors and "
        "what each does per message, the part a faster send → held has to cut.",
    ]) + "\n"


def _cpu_text(result: dict[str, Any]) -> str:
    cpu = result.get("cpu_ms_per_message")
    if not cpu or len(cpu) < 3:
        return ""
    return (
        f" CPU per message over the same messages (user + system, /proc): Ana's daemon "
        f"{cpu['sender']:.2f} ms, the relay {cpu['relay']:.2f} ms, Ben's daemon "
        f"{cpu['recipient']:.2f} ms, {sum(cpu.values()):.2f} ms in all against "
        f"{result['loop_ms_per_message']:.2f} ms of wall time per message (send, then poll "
        "until decided). Some of it is off the path (the sender's `sent` commit, acks, the "
        "receipts that go back once per burst); what is on it is most of each stage, so a "
        "faster send → held has to cut the processes' own work, not only their waits."
    )


def markdown(result: dict[str, Any]) -> str:
    """The page's section body: one row per stage, then the costs timed alone."""
    stages = result["stages"]
    whole = sum(s["p50_ms"] for s in stages.values()) or 1.0
    rows = ["| stage | what it holds | p50 | p90 | share of the p50 sum |",
            "|---|---|---|---|---|"]
    for name, fig in stages.items():
        rows.append(f"| {name} | {STAGES[name]} | {fig['p50_ms']:.2f} ms | "
                    f"{fig['p90_ms']:.2f} ms | {fig['p50_ms'] / whole:.0%} |")
    alone = result["alone"]
    commit = alone.get("wal_commit", {}).get("p50_ms")
    echo = alone.get("ws_echo", {}).get("p50_ms")
    floor = "" if commit is None or echo is None else (
        f" The floor of send → held with our durability is two loopback hops and three commits "
        f"one after another (Ana's outbox, the relay's, Ben's): a raw trio-websocket round trip "
        f"{echo:.2f} ms plus three WAL commits with `synchronous=FULL` of {commit:.2f} ms each "
        f"(timed alone in the same run) = {echo + 3 * commit:.2f} ms, before any Python."
    )
    return "\n".join([
        *rows, "",
        f"{result['messages']} messages one at a time on two real daemons and a real relay "
        f"(loopback); send → held p50 {result['send_to_held']['p50_ms']:.2f} ms, send → "
        f"decided by the gate p50 {result['send_to_decided']['p50_ms']:.2f} ms, the `send` "
        f"reply (relay's `posted`) p50 {result['send_reply']['p50_ms']:.2f} ms. Every boundary "
        "is a stamp the path commits anyway (outbox, the relay's seq time, inbound, held, "
        "notice), so nothing is instrumented. Timed alone in the same run: one fsync of "
        f"4 KiB {alone['fsync_4k']['p50_ms']:.2f} ms (each commit pays at least one), sealing "
        f"a 200-byte op {alone['seal_200b']['p50_ms']:.3f} ms, opening and verifying it "
        f"{alone['open_verify_200b']['p50_ms']:.3f} ms; the rest of a stage is the processes' "
        "own work around those (decoding, actor hand-offs, store calls) and waiting (the next "
        f"transaction, the other processes' commits on the same disk).{floor}"
        f"{_cpu_text(result)} Load average (1 min) before {result.get('load_before', '?')}, after "
        f"{result.get('load_after', '?')}: on a loaded machine every stage stretches. "
        "See `bench/timeline.py`.",
    ]) + "\n" + _profile_table(result)


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few messages, for smoke runs")
    parser.add_argument("--messages", type=int, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.messages or (10 if args.quick else 100))
    result["markdown"] = markdown(result)
    if args.json:
        print(json.dumps(result))
        return
    print(result["markdown"])


if __name__ == "__main__":
    main()
