"""Relay nodes on NATS JetStream: throughput with one and two nodes, and what the NATS hop costs.

    python -m bench.nats_relay            # 8 sender/receiver pairs for 5 s, 300 latency samples
    python -m bench.nats_relay --quick    # 1 pair, 0.3 s, 10 samples (smoke)
    python -m bench.nats_relay --json

Setups, each on a fresh nats-server (JetStream, file storage, loopback) or data dir:

* ``sqlite``: one relay on SQLite, the baseline.
* ``nats-1``: one relay node with ``--nats``; every client on it (it leads).
* ``nats-2``: two nodes on the same NATS; half the pairs send on the leader and receive on the
  follower, half the other way round.
* latency only, ``nats-2 follower``: sender and receiver both on the follower, so every frame
  crosses NATS twice (in to the leader, out to the follower).

Throughput: each pair's sender posts 200-byte ops with up to ``--window`` in flight, its receiver
takes the pushes and acknowledges every 64; ops/s counts ``posted`` replies. Latency: one pair,
one op at a time: post -> ``posted`` (the commit round trip) and post -> push at the receiver.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from bench._common import close_all, progress, summary_ms
from crosstalk.wire import relay as w
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.nats_process import NatsServer
from tests.relay.process import RelayProcess

BODY = os.urandom(200)


@contextlib.contextmanager
def relays(kind: str, work: Path) -> Iterator[list[RelayProcess]]:
    """Start the relays of one setup (stopped by pid on the way out); node 0 leads."""
    nats: NatsServer | None = None
    started: list[RelayProcess] = []
    try:
        extra: tuple[str, ...] = ("--op-rate", "1000000")  # measure the relay, not its limiter
        if kind != "sqlite":
            nats = NatsServer(work / "nats")
            nats.start()
            extra = (*extra, "--nats", nats.url)
        count = 2 if kind == "nats-2" else 1
        for i in range(count):
            data = work / f"node{i}"
            if i:
                data.mkdir(mode=0o700)
                shutil.copy2(work / "node0" / "relay.key", data / "relay.key")
            node = RelayProcess(data, work / f"node{i}.stderr", *extra)
            node.start()
            started.append(node)
        yield started
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


async def throughput(ports: list[int], pairs: int, seconds: float, window: int) -> float:
    posted = 0
    go, all_ready = trio.Event(), trio.Event()
    ready = 0
    sockets: list[WebSocketConnection] = []

    async def run_pair(i: int) -> None:
        nonlocal posted, ready
        send_port, recv_port = ports[i % len(ports)], ports[(i + 1) % len(ports)]
        async with pair(send_port, recv_port, f"room-{i}") as (a, b):
            sockets.extend((a.ws, b.ws))
            ready += 1
            if ready == pairs:
                all_ready.set()
            await go.wait()
            async with trio.open_nursery() as inner:
                inner.start_soon(_receive_forever, b, f"room-{i}")
                credit = trio.Semaphore(window)
                inner.start_soon(_count_posted, a, credit, lambda: _bump())
                with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
                    for n in itertools.count(1):
                        await credit.acquire()
                        await a.send(w.Post(a.next_req(), f"room-{i}", f"op-{n}", BODY))
            # Hold the sockets (their reader tasks) until cancelled, so their close completes.
            await trio.sleep_forever()

    def _bump() -> None:
        nonlocal posted
        posted += 1

    async with trio.open_nursery() as nursery:
        for i in range(pairs):
            nursery.start_soon(run_pair, i)
        with trio.fail_after(60):
            await all_ready.wait()
        go.set()
        start_count, start = posted, time.perf_counter()
        await trio.sleep(seconds)  # the measuring window itself
        rate = (posted - start_count) / (time.perf_counter() - start)
        await close_all(sockets)
        nursery.cancel_scope.cancel()
    return rate


async def _count_posted(a: RelayClient, credit: trio.Semaphore, bump: object) -> None:
    with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
        await _count_posted_until_closed(a, credit, bump)


async def _count_posted_until_closed(
    a: RelayClient, credit: trio.Semaphore, bump: object
) -> None:
    while True:
        frame = await a.recv()
        if isinstance(frame, w.Posted):
            bump()  # type: ignore[operator]
            credit.release()
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


async def measure(args: argparse.Namespace) -> dict[str, object]:
    results: dict[str, object] = {}
    for kind in ("sqlite", "nats-1", "nats-2"):
        progress(f"{kind}: {args.pairs} pairs for {args.seconds} s, {args.samples} samples")
        with tempfile.TemporaryDirectory() as tmp, relays(kind, Path(tmp)) as nodes:
            ports = [n.port for n in nodes]
            with trio.fail_after(300):
                rate = await throughput(ports, args.pairs, args.seconds, args.window)
                lat = await latency(ports[0], ports[-1], args.samples, "lat-1")
                entry: dict[str, object] = {"ops_per_s": round(rate, 1), "latency": lat}
                if kind == "nats-2":
                    entry["latency_both_on_follower"] = await latency(
                        ports[1], ports[1], args.samples, "lat-2")
            results[kind] = entry
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--window", type=int, default=16)
    args = parser.parse_args()
    args.pairs, args.seconds, args.samples = (1, 0.3, 10) if args.quick else (8, 5.0, 300)
    results = trio.run(measure, args)
    if args.json:
        print(json.dumps({"nats_relay": results}, indent=2))
        return
    for kind, entry in results.items():
        assert isinstance(entry, dict)
        print(f"{kind:8} {entry['ops_per_s']:>9} ops/s  latency {json.dumps(entry['latency'])}")
        if "latency_both_on_follower" in entry:
            print(f"{'':8} both clients on the follower: "
                  f"{json.dumps(entry['latency_both_on_follower'])}")


if __name__ == "__main__":
    main()
