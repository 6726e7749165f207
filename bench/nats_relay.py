"""Stateless relay nodes on NATS JetStream: how the work spreads over 1, 2 and 3 nodes.

    python -m bench.nats_relay            # 8 sender/receiver pairs for 5 s, 300 latency samples
    python -m bench.nats_relay --quick    # 1 node and 2, 0.3 s windows, 10 samples (smoke)
    python -m bench.nats_relay --json
    python -m bench.nats_relay --nodes 1,2 --rounds 5   # only these node counts, 5 rounds

Every setup runs on a fresh nats-server (JetStream, file storage, loopback) or data directory.
NATS is pinned to CPU 0 and every relay node to CPU 1 (all their threads, as ``taskset -a -p``
does), so the relay nodes share one core whatever their number; the fake clients (this process)
are not pinned. On a machine with one core nothing is pinned (``pinned`` says so).

* ``sqlite``: one relay on SQLite, the baseline: throughput and post -> push latency.
* ``nodes`` 1, 2, 3: throughput with each pair's sender on node i and its receiver on node i+1
  (one node: both on it), the CPU each relay node, NATS and the fake clients used in the window
  per op, and the busiest node's share of all relay CPU (ideal 1/N). The machine is shared and
  noisy, so the node counts run in ``--rounds`` rounds (1, 2, 3 nodes, then again), each on a
  fresh server: a row gives each figure's median over the rounds, and "÷ 1 node" is the median
  of each round's ratio (runs minutes apart do not share the same background load).
* ``rooms`` on two nodes: 16 pairs each in its own room against one pair whose sender keeps the
  same 16 posts in flight in one room: a room takes one message per JetStream round trip, and
  the posts its sender queued meanwhile share the next one.
* ``latency``: one pair, one op at a time, sender on node 1 and receiver on node 2 (post ->
  posted is the commit round trip, post -> push crosses nodes through RePublish), next to the
  SQLite relay's.

Throughput: each sender posts 200-byte ops with up to ``--window`` in flight, its receiver takes
the pushes; both acknowledge every 64th op; ops/s counts ``posted`` replies.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from bench._common import MANY, close_all, cpu_seconds, progress, summary_ms
from crosstalk.wire import relay as w
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.nats_process import NatsServer
from tests.relay.process import RelayProcess

BODY = os.urandom(200)
NATS_CPU, RELAY_CPU = 0, 1


def can_pin() -> bool:
    return len(os.sched_getaffinity(0)) >= 2 and {NATS_CPU, RELAY_CPU} <= os.sched_getaffinity(0)


def pin(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` on ``cpu`` (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task.name), {cpu})


@contextlib.contextmanager
def relays(kind: str, count: int, work: Path, pinned: bool) -> Iterator[
        tuple[list[RelayProcess], NatsServer | None]]:
    """Start one setup (stopped by pid on the way out)."""
    nats: NatsServer | None = None
    started: list[RelayProcess] = []
    try:
        extra: tuple[str, ...] = ("--op-rate", "1000000", *MANY)  # the relay, not its limits
        if kind == "nats":
            nats = NatsServer(work / "nats")
            nats.start()
            assert nats.proc is not None
            if pinned:
                pin(nats.proc.pid, NATS_CPU)
            extra = (*extra, "--nats", nats.url)
        for i in range(count):
            data = work / f"node{i}"
            if i:
                data.mkdir(mode=0o700)
                shutil.copy2(work / "node0" / "relay.key", data / "relay.key")
            node = RelayProcess(data, work / f"node{i}.stderr", *extra)
            node.start()
            assert node.proc is not None
            if pinned and kind == "nats":
                pin(node.proc.pid, RELAY_CPU)
            started.append(node)
        yield started, nats
    finally:
        for node in started:
            node.kill(signal.SIGTERM)
        if nats is not None:
            nats.stop()


@contextlib.asynccontextmanager
async def pair(send_port: int, recv_port: int, room: str) -> AsyncIterator[
        tuple[RelayClient, RelayClient]]:
    async with open_client(send_port, Identity()) as a, open_client(recv_port, Identity()) as b:
        await pair_and_room(a, b, room)
        yield a, b


async def throughput(
    ports: list[int], pairs: int, seconds: float, window: int,
    window_hook: Callable[[], None] = lambda: None, prefix: str = "room",
) -> float:
    """ops/s over ``pairs`` rooms; ``window_hook`` runs at the start and end of the window."""
    posted = 0
    go, all_ready = trio.Event(), trio.Event()
    ready = 0
    sockets: list[WebSocketConnection] = []

    def bump() -> None:
        nonlocal posted
        posted += 1

    async def run_pair(i: int) -> None:
        nonlocal ready
        send_port, recv_port = ports[i % len(ports)], ports[(i + 1) % len(ports)]
        room = f"{prefix}-{i}"
        async with pair(send_port, recv_port, room) as (a, b):
            sockets.extend((a.ws, b.ws))
            ready += 1
            if ready == pairs:
                all_ready.set()
            await go.wait()
            async with trio.open_nursery() as inner:
                inner.start_soon(_receive_forever, b, room)
                credit = trio.Semaphore(window)
                inner.start_soon(_count_posted, a, credit, bump)
                with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
                    for n in itertools.count(1):
                        await credit.acquire()
                        await a.send(w.Post(a.next_req(), room, f"op-{n}", BODY))
            # Hold the sockets (their reader tasks) until cancelled, so their close completes.
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for i in range(pairs):
            nursery.start_soon(run_pair, i)
        with trio.fail_after(120):
            await all_ready.wait()
        go.set()
        await trio.sleep(min(1.0, seconds / 5))  # warm up: every sender's window filled
        window_hook()
        start_count, start = posted, time.perf_counter()
        await trio.sleep(seconds)  # the measuring window itself
        rate = (posted - start_count) / (time.perf_counter() - start)
        window_hook()
        await close_all(sockets)
        nursery.cancel_scope.cancel()
    return rate


async def _count_posted(a: RelayClient, credit: trio.Semaphore, bump: Callable[[], None]) -> None:
    """Count the sender's ``posted`` replies; it acknowledges its own ops every 64, as its
    receiver does (a member who never acknowledges holds every op: a fast room fills its
    backlog, 10,000 ops, within the window)."""
    with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
        while True:
            frame = await a.recv()
            if isinstance(frame, w.Posted):
                bump()
                credit.release()
                if frame.seq % 64 == 0:
                    await a.send(w.Ack(frame.room, frame.seq))
            elif isinstance(frame, w.Error):
                raise RuntimeError(f"the relay refused a post: {frame.code} {frame.message}")


async def _receive_forever(b: RelayClient, room: str) -> None:
    with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
        while True:
            frame = await b.recv()
            if isinstance(frame, w.Op) and frame.seq % 64 == 0:
                await b.send(w.Ack(room, frame.seq))


async def latency(
    send_port: int, recv_port: int, samples: int, room: str
) -> dict[str, dict[str, float]]:
    commit: list[float] = []
    deliver: list[float] = []
    async with pair(send_port, recv_port, room) as (a, b):
        for i in range(samples):
            started = time.perf_counter()
            await a.ok(w.Post(a.next_req(), room, f"l{i}", BODY))
            commit.append(time.perf_counter() - started)
            await b.ops(1)
            deliver.append(time.perf_counter() - started)
            await b.send(w.Ack(room, i + 1))
    return {"post_to_posted": summary_ms(commit), "post_to_push": summary_ms(deliver)}


class CpuWindow:
    """CPU seconds each process used between the two calls of :meth:`mark`."""

    def __init__(self, pids: list[int | None]) -> None:
        self.pids = pids
        self.marks: list[list[float]] = []

    def mark(self) -> None:
        self.marks.append([cpu_seconds(pid) for pid in self.pids])

    def used(self) -> list[float]:
        start, end = self.marks[0], self.marks[-1]
        return [b - a for a, b in zip(start, end, strict=True)]


async def spread(args: argparse.Namespace, count: int, work: Path,
                 extras: bool = True) -> dict[str, Any]:
    """Throughput and CPU per op on ``count`` nodes (on two, with ``extras``: also 16 rooms
    against 1 and the cross-node latency)."""
    with relays("nats", count, work, args.pinned) as (nodes, nats):
        assert nats is not None and nats.proc is not None
        ports = [n.port for n in nodes]
        pids: list[int | None] = [n.proc.pid for n in nodes if n.proc is not None]
        cpu = CpuWindow([*pids, nats.proc.pid, None])  # None: this process, the fake clients
        rate = await throughput(ports, args.pairs, args.seconds, args.window, cpu.mark)
        used = cpu.used()
        ops = rate * args.seconds
        relay_cpu = used[:-2]
        entry: dict[str, Any] = {
            "ops_per_s": round(rate, 1),
            "cpu_ms_per_op": [round(s * 1000 / ops, 3) for s in relay_cpu],
            "busiest_share": round(max(relay_cpu) / sum(relay_cpu), 3) if sum(relay_cpu) else 0,
            "relay_cpu_s": round(sum(relay_cpu), 3),
            "nats_cpu_ms_per_op": round(used[-2] * 1000 / ops, 3),
            "client_cpu_ms_per_op": round(used[-1] * 1000 / ops, 3),
            "window_s": args.seconds,
        }
        if count == 2 and extras:
            many, one = args.rooms, 1
            progress(f"nats, 2 nodes: {many} rooms against 1")
            entry["rooms"] = {
                str(many): round(await throughput(ports, many, args.seconds, args.window,
                                                  prefix="many"), 1),
                str(one): round(await throughput(ports, one, args.seconds, args.window * many,
                                                 prefix="one"), 1),
                "in_flight": args.window * many,
            }
            progress(f"nats, 2 nodes: {args.samples} latency samples across nodes")
            entry["latency"] = await latency(ports[0], ports[1], args.samples, "lat-x")
    return entry


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"pinned": args.pinned, "pairs": args.pairs,
                               "window": args.window}
    progress(f"sqlite: {args.pairs} pairs for {args.seconds} s, {args.samples} samples")
    with tempfile.TemporaryDirectory() as tmp, relays("sqlite", 1, Path(tmp), False) as (
            nodes, _):
        ports = [nodes[0].port]
        with trio.fail_after(300):
            results["sqlite"] = {
                "ops_per_s": round(await throughput(ports, args.pairs, args.seconds,
                                                    args.window), 1),
                "latency": await latency(ports[0], ports[0], args.samples, "lat-1"),
            }
    rounds: dict[str, list[dict[str, Any]]] = {str(count): [] for count in args.nodes}
    for i in range(args.rounds):
        for count in args.nodes:
            progress(f"nats, {count} node(s), round {i + 1} of {args.rounds}: {args.pairs} pairs "
                     f"for {args.seconds} s")
            with tempfile.TemporaryDirectory() as tmp, trio.fail_after(300):
                rounds[str(count)].append(await spread(args, count, Path(tmp), extras=i == 0))
    results["rounds"] = args.rounds
    results["nodes"] = {count: medians(runs, rounds.get("1")) for count, runs in rounds.items()}
    return results


def medians(runs: list[dict[str, Any]], ones: list[dict[str, Any]] | None) -> dict[str, Any]:
    """One node count's row from its rounds: each figure's median (per node for the CPU per op),
    the ops/s of every round, and the median of each round's ratio to one node's ops/s in the
    same round (``ones``). Rooms and latency come from the first round, the only one with them."""
    row: dict[str, Any] = dict(runs[0])
    for key in ("ops_per_s", "busiest_share", "relay_cpu_s", "nats_cpu_ms_per_op",
                "client_cpu_ms_per_op"):
        row[key] = round(statistics.median(r[key] for r in runs), 3)
    row["cpu_ms_per_op"] = [round(statistics.median(node), 3)
                            for node in zip(*(r["cpu_ms_per_op"] for r in runs), strict=True)]
    row["relay_cpu_ms_per_op"] = round(statistics.median(sum(r["cpu_ms_per_op"]) for r in runs),
                                       3)
    row["ops_per_s_each_round"] = [r["ops_per_s"] for r in runs]
    if ones:
        row["ratio_to_one"] = round(statistics.median(
            r["ops_per_s"] / one["ops_per_s"] for r, one in zip(runs, ones, strict=True)), 3)
    return row


# --- the page's section (bench/report.py takes it as it is) --------------------------------------


def _x(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "—"


def _ratio(e: dict[str, Any], one: float) -> str:
    return f"{e['ratio_to_one']:.2f}×" if "ratio_to_one" in e else _x(e["ops_per_s"], one)


def section(r: dict[str, Any]) -> str:
    """The markdown of the NATS section (under its heading) for ``r``, this module's result."""
    one = r["nodes"]["1"]["ops_per_s"]
    rows = [f"| {n} | {e['ops_per_s']:,.0f} | {_ratio(e, one)} | "
            f"{' / '.join(f'{c:.3f}' for c in e['cpu_ms_per_op'])} | "
            f"{e['busiest_share']:.2f} ({1 / int(n):.2f}) | {e['nats_cpu_ms_per_op']:.3f} | "
            f"{e.get('client_cpu_ms_per_op', 0):.3f} |"
            for n, e in r["nodes"].items()]
    rounds = r.get("rounds", 1)
    each = (f" Each row is the median of {rounds} rounds run in turn (1, 2, 3 nodes, then "
            "again), each on a fresh server; ÷ 1 node is the median of each round's ratio, "
            "since the machine is shared and its load moves between runs." if rounds > 1 else "")
    pinning = ("NATS pinned to CPU 0 and every relay node to CPU 1 (all threads, as "
               "`taskset -a -p`); the fake clients float" if r["pinned"]
               else "nothing pinned (fewer than two CPUs)")
    out = [
        f"Stateless nodes, each deciding by compare-and-set on JetStream; {pinning}. "
        f"{r['pairs']} sender/receiver pairs, each in its own room with up to {r['window']} "
        "posts in flight, each sender on node i and its receiver on node i+1; SQLite "
        f"relay: {r['sqlite']['ops_per_s']:,.0f} ops/s in the same run.{each}", "",
        "| relay nodes | ops/s | ÷ 1 node | relay CPU per op, each node (ms) | busiest node's "
        "share of relay CPU (ideal) | NATS CPU per op (ms) | fake clients' CPU per op (ms) |",
        "|---|---|---|---|---|---|---|",
        *rows, "",
    ]
    two = r["nodes"].get("2", {})
    rooms = two.get("rooms")
    if rooms:
        many = next(k for k in rooms if k not in ("1", "in_flight"))
        out += [
            f"One room against many, on two nodes, with {rooms['in_flight']} posts in flight "
            f"in all: {many} rooms carried {rooms[many]:,.0f} ops/s, one room "
            f"{rooms['1']:,.0f} ops/s ({_x(rooms['1'], rooms[many])}). A room takes one message "
            "per JetStream round trip (each write is checked against the room's last "
            "sequence); the posts a sender queued during one share the next message, up to "
            "64, so one busy room is not bound to one op per round trip.", "",
        ]
    lat = two.get("latency")
    if lat:
        base = r["sqlite"]["latency"]
        setups: list[tuple[str, Any]] = [
            ("one relay, embedded SQLite (sender and receiver on it)", base),
            ("two nodes: sender on node 1, receiver on node 2", lat),
        ]
        out += [
            "| post → push, one op at a time | post → posted p50 | post → push p50 | "
            "post → push p99 | push p50 ÷ SQLite |",
            "|---|---|---|---|---|",
            *(f"| {label} | {e['post_to_posted']['p50_ms']:.1f} ms | "
              f"{e['post_to_push']['p50_ms']:.1f} ms | {e['post_to_push']['p99_ms']:.1f} ms | "
              f"{_x(e['post_to_push']['p50_ms'], base['post_to_push']['p50_ms'])} |"
              for label, e in setups), "",
        ]
    out += [
        "CPU is each process's user + system time over the measuring window (/proc), divided by "
        "the ops posted in it. Durability differs: the SQLite relay fsyncs every commit, while "
        "JetStream on one server (R1, as here) does not fsync each write by default; a cluster "
        "relies on three replicas instead (docs/deploy.md).", "",
    ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--nodes", help="node counts, comma-separated (1 must be one of them; "
                        "default 1,2,3, or 1,2 with --quick)")
    parser.add_argument("--rounds", type=int, help="rounds of every node count (default 3, or "
                        "1 with --quick)")
    args = parser.parse_args()
    args.pairs, args.seconds, args.samples, nodes, args.rooms, rounds = (
        (1, 0.3, 10, (1, 2), 2, 1) if args.quick else (8, 5.0, 300, (1, 2, 3), 16, 3))
    args.nodes = tuple(int(n) for n in args.nodes.split(",")) if args.nodes else nodes
    if 1 not in args.nodes:
        parser.error("--nodes must include 1 (every ratio is to one node)")
    args.rounds = args.rounds or rounds
    args.pinned = can_pin()
    results = trio.run(measure, args)
    results["markdown"] = section(results)
    if args.json:
        print(json.dumps({"nats_relay": results}, indent=2))
        return
    print(results["markdown"])


if __name__ == "__main__":
    main()
