"""Scaling curves: how latency and memory grow with members per room, rooms per daemon and
connections per relay. Each point sits next to the curve's first point, measured in the same
run (the ratio column), so the shape travels even where the absolute figures do not.

Run: ``python -m bench.scaling [--quick] [--json]``.

*Members per room* (2 → 200), relay level: see :mod:`bench.scaling_members` (which also runs
alone, and can compare the relay of another source tree).

*Rooms per daemon* (1 → 1,000): two real paired daemons. Before each point the recipient's daemon
is stopped by pid, rooms are created for its identity at the relay (as another device of it) and
recorded in its store, and it is started again (``daemon run``, polled until ``status``
answers); all rooms are joined and quiet, each with its room actor running. Figures: that start
time, the daemon's RSS, and send → held latency in the one live room.

*Connections per relay* (10 → 5,000): one relay; idle authenticated connections (handshake and
resume) are added step by step; at each step the relay's RSS, and post → push latency between two
active clients in a room of two.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nacl.utils
import trio

from bench._common import close_all, progress, rss_kib, summary_ms
from bench.latency import TwoDaemons, measure_pair
from bench.scaling_members import FAST, FanOut, members_per_room
from crosstalk.client import call
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home
from crosstalk.store.db import connect
from crosstalk.store.identity import load_identity
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire import relay as w
from tests.e2e.conftest import Person, stop_pid
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.process import RelayProcess


@contextlib.asynccontextmanager
async def open_clients(port: int, count: int) -> AsyncIterator[list[RelayClient]]:
    """``count`` authenticated, resumed clients (at most 64 connecting at once), each held open
    by its own task until exit."""
    clients: list[RelayClient] = []
    limiter = trio.CapacityLimiter(64)

    async def one(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with contextlib.AsyncExitStack() as stack:
            async with limiter:
                client = await stack.enter_async_context(open_client(port, Identity()))
            clients.append(client)
            task_status.started()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        with trio.fail_after(300):
            async with trio.open_nursery() as starting:
                for _ in range(count):
                    starting.start_soon(nursery.start, one)
        yield clients
        await close_all(client.ws for client in clients)
        nursery.cancel_scope.cancel()


# --- connections per relay -----------------------------------------------------------------------


async def _connections(relay: RelayProcess, steps: list[int], posts: int) -> list[dict[str, Any]]:
    assert relay.proc is not None
    points = []
    async with open_clients(relay.port, 2) as pair, contextlib.AsyncExitStack() as stack:
        await pair_and_room(pair[0], pair[1], "probe")
        opened = 0
        for step in steps:
            progress(f"connections per relay: {step:,}")
            await stack.enter_async_context(open_clients(relay.port, step - opened))
            opened = step
            await trio.sleep(0.5)  # let the relay settle before reading its RSS
            latency = await FanOut(pair, "probe").samples(posts)
            points.append({"x": step, "latency": summary_ms(latency),
                           "rss_kib": rss_kib(relay.proc.pid)})
    return points


def connections_per_relay(steps: list[int], posts: int, workdir: Path) -> list[dict[str, Any]]:
    """One point per idle connection count in ``steps`` (ascending), all on one relay."""
    relay = RelayProcess(workdir / "connections", workdir / "relay.stderr", *FAST)
    relay.start()
    try:
        return trio.run(_connections, relay, steps, posts)
    finally:
        relay.kill(signal.SIGTERM)


# --- rooms per daemon ----------------------------------------------------------------------------


async def _create_at_relay(port: int, me: Identity, rooms: list[str]) -> None:
    async with open_client(port, me, device="bench-rooms") as client:
        for room in rooms:
            await client.ok(w.Create(client.next_req(), room, me.vouch(room, me)))


def _add_rooms(person: Person, port: int, count: int) -> None:
    """Create ``count`` more rooms with only ``person`` in them, at the relay and in its store
    (its daemon must be stopped)."""
    home = Home.resolve(str(person.home))
    record = load_identity(home.identity)
    assert record is not None
    me = Identity(record.signing_seed)
    me.x_pub = record.x25519_public
    rooms = [nacl.utils.random(16).hex() for _ in range(count)]
    trio.run(_create_at_relay, port, me, rooms)
    conn = connect(home.database)
    conn.execute("BEGIN")
    for room in rooms:
        add_room(conn, Room(room, f"quiet-{room[:6]}", "shared", "joined", 0, time.time()),
                 nacl.utils.random(32))
        add_member(conn, RoomMember(room, me.fp, record.label, me.ed_pub, me.x_pub))
    conn.execute("COMMIT")
    conn.close()


def _start_and_wait(person: Person, timeout: float) -> float:
    """Start ``person``'s daemon in the foreground of its own process (``daemon run``); seconds
    until its control socket answers ``status``. Longer bound than the CLI's: startup grows with
    the number of rooms."""
    env = {**os.environ, "CROSSTALK_RELAY": person.relay}
    env.pop("CROSSTALK_HOME", None)
    home = Home.resolve(str(person.home))
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "crosstalk", "daemon", "run", "--home",
                             str(person.home)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout
    while True:
        try:
            call(home, "status", timeout=2.0)
            return time.perf_counter() - start
        except CrosstalkError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the daemon did not answer within {timeout:.0f} s") from None
            time.sleep(0.02)


def rooms_per_daemon(sizes: list[int], messages: int) -> list[dict[str, Any]]:
    """One point per total room count in ``sizes`` (ascending) at the recipient's daemon."""
    points: list[dict[str, Any]] = []
    with TwoDaemons(*FAST) as (ana, ben):
        a, b = Home.resolve(str(ana.home)), Home.resolve(str(ben.home))
        rooms = 1
        for size in sizes:
            progress(f"rooms per daemon: {size:,}")
            pid = ben.daemon_pid()
            if pid is not None:
                stop_pid(pid)
            _add_rooms(ben, _relay_port(ben), size - rooms)
            rooms = size
            try:
                cold = _start_and_wait(ben, 180.0)
                measure_pair(a, b, "ben", 3)  # warm-up: the link is up, the room actor running
                timed = measure_pair(a, b, "ben", messages)
            except (RuntimeError, TimeoutError) as exc:
                points.append({"x": size, "error": f"{type(exc).__name__}: {exc}"})
                break  # larger sizes would fail the same way, only slower
            pid = ben.daemon_pid()
            assert pid is not None
            points.append({"x": size, "latency": summary_ms(timed["held"]),
                           "rss_kib": rss_kib(pid), "cold_start_s": round(cold, 3)})
    return points


def _relay_port(person: Person) -> int:
    return int(person.relay.rsplit(":", 1)[1])


def run(quick: bool) -> dict[str, Any]:
    """All three curves; JSON-ready."""
    posts = 3 if quick else 20
    with tempfile.TemporaryDirectory(prefix="cts-", dir="/tmp") as tmp:
        work = Path(tmp)
        return {
            "members_per_room": members_per_room(
                [3] if quick else [2, 10, 50, 200], posts, work),
            "connections_per_relay": connections_per_relay(
                [2, 5] if quick else [10, 100, 1000, 5000], posts, work),
            "rooms_per_daemon": rooms_per_daemon([2] if quick else [1, 10, 100, 1000],
                                                 3 if quick else 20),
        }


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for smoke runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.quick)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
