"""Scaling curves: how latency and memory grow with members per room, rooms per daemon and
connections per relay. Each point sits next to the curve's first point, measured in the same
run (the ratio column), so the shape travels even where the absolute figures do not.

Run: ``python -m bench.scaling [--quick] [--json]``.

*Members per room* (2 → 200), relay level: a fresh relay process per size, that many fake clients
(``tests.relay.client``: real handshakes, real frames) in one room, each added by the previous
one through a pairing slot. One member posts 200-byte ops one at a time; latency is until the
*last* other member has the push. Memory is the relay's RSS growth over its idle start.

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
import itertools
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
from trio_websocket import ConnectionClosed

from bench._common import MANY, close_all, progress, rss_kib, summary_ms
from bench._wsload import LoadSocket, open_load_socket
from bench.latency import TwoDaemons, measure_pair
from bench.relay_throughput import _pair_and_add
from crosstalk.client import call
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home
from crosstalk.store.db import connect
from crosstalk.store.identity import load_identity
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire import relay as w
from tests.e2e.conftest import Person, stop_pid
from tests.relay.client import Identity, RelayClient, handshake, open_client, pair_and_room
from tests.relay.process import RelayProcess

BODY = b"x" * 200
FAST = ("--op-rate", "1000000", *MANY)  # the per-identity send limit would pace the posts


# --- fan-out: one poster, everyone else counts arrivals ------------------------------------------


class FanOut:
    """Post one op at a time from ``members[0]``; time until all the others received it.

    Members that speak :class:`bench._wsload.LoadSocket` look for the op's id in each payload's
    bytes and decode only every 16th frame (to acknowledge it); members over trio-websocket
    decode every frame. With 200 members in this one process, decoding each of the 199 copies
    of an op cost this process more than the relay spent sending them: the curve measured the
    bench, not the relay.
    """

    def __init__(self, members: list[RelayClient], room: str) -> None:
        self.members, self.room = members, room
        self.waiting: dict[bytes, tuple[int, trio.Event]] = {}

    def _arrived(self, op_id: bytes) -> None:
        left, done = self.waiting[op_id]
        self.waiting[op_id] = (left - 1, done)
        if left == 1:
            done.set()

    async def _read(self, client: RelayClient) -> None:
        if isinstance(client.ws, LoadSocket):
            await self._read_payloads(client, client.ws)
            return
        seen = 0
        while True:
            frame = await client.recv()
            if isinstance(frame, w.Error):
                raise RuntimeError(f"the relay refused: {frame.code}: {frame.message}")
            if not isinstance(frame, w.Op) or frame.op_id.encode() not in self.waiting:
                continue
            self._arrived(frame.op_id.encode())
            seen += 1
            if seen % 16 == 0:
                await client.send(w.Ack(self.room, frame.seq))

    async def _read_payloads(self, client: RelayClient, ws: LoadSocket) -> None:
        seen = 0
        while True:
            for payload in await ws.receive_payloads():
                at = payload.find(b'"fan-')
                if at < 0:
                    if b'"t":"error"' in payload:
                        raise RuntimeError(f"the relay refused: {payload[:200]!r}")
                    continue
                op_id = payload[at + 1:at + 1 + _FAN_ID_LEN]
                if op_id not in self.waiting:
                    continue
                self._arrived(op_id)
                seen += 1
                if seen % 16 == 0:
                    frame = w.decode_relay_frame(payload.decode())
                    assert isinstance(frame, w.Op)
                    await client.send(w.Ack(self.room, frame.seq))

    async def samples(self, count: int) -> list[float]:
        poster, out = self.members[0], []
        async with trio.open_nursery() as nursery:
            for client in self.members:
                nursery.start_soon(self._read, client)
            for i in range(count + 3):
                op_id, done = f"fan-{nacl.utils.random(8).hex()}", trio.Event()
                self.waiting[op_id.encode()] = (len(self.members) - 1, done)
                start = time.perf_counter()
                await poster.send(w.Post(poster.next_req(), self.room, op_id, BODY))
                # The first op waits behind every roster/presence push of the room's build.
                with trio.fail_after(30 if i else 240):
                    await done.wait()
                if i >= 3:
                    out.append(time.perf_counter() - start)
            nursery.cancel_scope.cancel()
        return out


_FAN_ID_LEN = len("fan-") + 16


@contextlib.asynccontextmanager
async def open_load_clients(port: int, count: int) -> AsyncIterator[list[RelayClient]]:
    """``count`` authenticated, resumed clients over :class:`LoadSocket` (at most 64 connecting
    at once), closed on exit."""
    clients: list[RelayClient] = []
    limiter = trio.CapacityLimiter(64)

    async def one() -> None:
        async with limiter:
            ws = await open_load_socket(port)
            client = await handshake(ws, Identity(), "bench")  # type: ignore[arg-type]
            resumed = await client.ok(w.Resume(client.next_req(), {}))
            assert isinstance(resumed, w.Resumed)
            client.resumed = resumed
            clients.append(client)

    try:
        with trio.fail_after(300):
            async with trio.open_nursery() as nursery:
                for _ in range(count):
                    nursery.start_soon(one)
        yield clients
    finally:
        for client in clients:
            with trio.CancelScope(shield=True):
                await client.ws.aclose()


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


# --- members per room ----------------------------------------------------------------------------


class Parked:
    """Members not making a request read and drop their pushes, as a live daemon would.

    A fake client reads only while it waits for a reply; left alone, its socket fills with
    roster and presence pushes and the relay stalls on it (it took 161 s to build a room of 200
    that way, most of it waiting). Cancelling a parked reader is safe: it waits in the socket's
    message channel, which gives up nothing to a cancelled receive.
    """

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.scopes: dict[int, trio.CancelScope] = {}

    async def _drain(self, client: RelayClient,
                     task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        with trio.CancelScope() as scope:
            task_status.started(scope)
            while True:
                await client.ws.get_message()  # not decoded: this process is the bottleneck

    async def park(self, client: RelayClient) -> None:
        self.scopes[id(client)] = await self.nursery.start(self._drain, client)

    def unpark(self, client: RelayClient) -> None:
        self.scopes.pop(id(client)).cancel()


async def _build_room(members: list[RelayClient], room: str) -> None:
    """Pair the first two into ``room``, then each member adds the next through a slot."""
    async with trio.open_nursery() as nursery:
        parked = Parked(nursery)
        for client in members[2:]:
            await parked.park(client)
        await pair_and_room(members[0], members[1], room)
        await parked.park(members[0])
        for previous, joining in itertools.pairwise(members[1:]):
            parked.unpark(joining)
            await _pair_and_add(previous, joining, room)
            await parked.park(previous)
        nursery.cancel_scope.cancel()


async def _members_point(relay: RelayProcess, size: int, posts: int) -> dict[str, Any]:
    assert relay.proc is not None
    await trio.sleep(0.3)
    before = rss_kib(relay.proc.pid)
    async with open_load_clients(relay.port, size) as members:
        room = f"members-{size}"
        start = time.perf_counter()
        await _build_room(members, room)
        build = time.perf_counter() - start
        for client in members:
            client.pushes.clear()
        grown = rss_kib(relay.proc.pid) - before
        latency = await FanOut(members, room).samples(posts)
    return {"x": size, "latency": summary_ms(latency), "rss_growth_kib": grown,
            "build_s": round(build, 2)}


def members_per_room(sizes: list[int], posts: int, workdir: Path) -> list[dict[str, Any]]:
    """One point per room size, each on a fresh relay process."""
    points: list[dict[str, Any]] = []
    for size in sizes:
        progress(f"members per room: {size}")
        stderr = workdir / f"relay-members-{size}.stderr"
        relay = RelayProcess(workdir / f"members-{size}", stderr, *FAST)
        relay.start()
        try:
            points.append(trio.run(_members_point, relay, size, posts))
        except (trio.TooSlowError, ConnectionClosed, RuntimeError, ExceptionGroup) as exc:
            # A size the relay cannot carry is a finding, not a crash of the whole curve.
            slow = stderr.read_text().count("closing a slow consumer")
            points.append({"x": size, "error": f"{_leaf(exc)}; the relay closed {slow} "
                                               "connection(s) as slow consumers"})
        finally:
            relay.kill(signal.SIGTERM)
    return points


def _leaf(exc: BaseException) -> str:
    """The first plain exception inside (nested) exception groups, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {str(exc)[:200]}"


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
