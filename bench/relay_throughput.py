"""Relay throughput and memory, next to a raw trio-websocket echo measured in the same run.

    python -m bench.relay_throughput --quick     # 2 and 6 clients, 20 idle connections (smoke)
    python -m bench.relay_throughput             # 2, 50 and 500 clients, 5,000 idle connections

Each client posts 200-byte ops into its room with up to ``--window`` posts in flight (a new one
as each ``posted`` comes back; ``--window 1`` is strict request/reply, the pattern a daemon keeps
per room, and the full run adds window-1 rows for 500 clients); every other member
receives each op as a push and acknowledges every 64. "ops/s" counts ``posted`` replies
(committed ops); "deliveries/s" counts pushed ops received. The ceiling is a trio-websocket echo
server in its own process, driven the same way (200-byte messages, the same window, a new one as
each echo returns) by the same number of clients. All clients run in this process; the relay
(or echo server) runs in another, so on a 2-core machine the client side takes the other core.

Both sides' clients use :mod:`bench._wsload`, not trio-websocket: one task per client reads
whatever its socket has, splits it into frames in place, tells a relay frame by its tag and
reads only its seq, and sends the frames one read calls for (new posts or messages, an ack) in
one write. Through trio-websocket and a full JSON decode per frame, this process cost about
940 us of CPU per op in rooms of 20 (20 frames received per op) and was the bound of every
window-1 row, the echo ceiling's included; the counts are the same (``posted`` replies and
``op`` pushes, each frame counted once).

Each row also says how busy each side was while it was measured (CPU seconds per second, from
``/proc``): a side near 1.0 is the bound. With fan-out the clients receive many frames per op,
so "relay_cores" and "relay_cpu_us_per_op" say what the relay itself costs, and they hold up
better than rates on a machine that other work loads.
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
from pathlib import Path

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, serve_websocket

from bench._common import MANY, close_all, cpu_seconds, progress
from bench._wsload import LoadSocket, open_load_socket
from crosstalk.wire import relay as w
from tests.relay.client import Identity, RelayClient, handshake, open_ws, pair_and_room
from tests.relay.process import RelayProcess

BODY = os.urandom(200)


class _Cpu:
    """CPU seconds per wall second of a server process and of this (client) process."""

    def __init__(self, server_pid: int) -> None:
        self.pid = server_pid
        self.start = (trio.current_time(), cpu_seconds(server_pid), cpu_seconds())

    def cores(self) -> tuple[float, float]:
        t0, server0, client0 = self.start
        elapsed = trio.current_time() - t0
        return ((cpu_seconds(self.pid) - server0) / elapsed,
                (cpu_seconds() - client0) / elapsed)


# --- the ceiling: a raw echo server --------------------------------------------------------------


async def _echo_handler(request: object) -> None:
    ws = await request.accept()  # type: ignore[attr-defined]
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass


async def _echo_main() -> None:
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, _echo_handler, "127.0.0.1", 0, None)
        print(json.dumps({"port": server.port}), flush=True)


def _start_echo() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.relay_throughput", "--echo-server"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(json.loads(proc.stdout.readline())["port"])
    return proc, port


async def _echo_rate(
    pid: int, port: int, clients: int, seconds: float, window: int, warm_up: float
) -> tuple[float, float, float]:
    count = connected = 0
    sockets: list[LoadSocket] = []
    connecting = trio.CapacityLimiter(64)
    go = trio.Event()

    async def one() -> None:
        nonlocal connected, count
        async with connecting:
            with trio.fail_after(60):
                ws = await open_load_socket(port)
        sockets.append(ws)
        connected += 1
        await go.wait()
        message = ws.frame(BODY.hex()[:200].encode())
        with contextlib.suppress(ConnectionClosed):  # closed at the end of the run
            await ws.send_raw(message * window)
            while True:  # a new message for each echo back, those of one read in one write
                got = len(await ws.receive_payloads())
                count += got
                await ws.send_raw(message * got)

    async with trio.open_nursery() as nursery:
        for _ in range(clients):
            nursery.start_soon(one)
        with trio.fail_after(300):
            while connected < clients:  # noqa: ASYNC110 - a bench progress poll, bounded above
                await trio.sleep(0.1)
        go.set()
        await trio.sleep(warm_up)
        start, count, cpu = trio.current_time(), 0, _Cpu(pid)
        await trio.sleep(seconds)
        rate = count / (trio.current_time() - start)
        server_cores, client_cores = cpu.cores()
        await close_all(sockets)
        nursery.cancel_scope.cancel()
    return rate, server_cores, client_cores


# --- the relay -----------------------------------------------------------------------------------


class _Member:
    def __init__(self, client: RelayClient, room: str, window: int) -> None:
        self.window = window
        self.client = client
        self.room = room
        self.posted = 0
        self.received = 0
        self.errors = 0

    async def run(self) -> None:
        """Post ``window`` ops, then a new one per ``posted`` (or refusal); count replies and
        pushes; acknowledge the highest seq seen every 64 events."""
        with contextlib.suppress(ConnectionClosed):  # the run ends by closing every socket
            await self._run(self.client.ws)

    async def _run(self, ws: LoadSocket) -> None:
        # A load generator, not a validator: a frame is told by its tag and only its seq is
        # read, so the figures measure the relay rather than this process's decoding. The tag
        # test is exact: JSON escapes every quote inside a string, so '"t":"op"' can only be
        # the frame's own tag (rooms and op ids are [A-Za-z0-9_-], bodies base64).
        template = w.encode_frame(w.Post(0, self.room, "OPID", BODY))
        ids = itertools.count()
        prefix = f"{id(self)}-"

        def post() -> bytes:
            return ws.frame(template.replace("OPID", f"{prefix}{next(ids)}", 1).encode())

        await ws.send_raw(b"".join(post() for _ in range(self.window)))
        events = high = 0
        while True:
            out: list[bytes] = []
            for payload in await ws.receive_payloads():
                if b'"t":"op"' in payload:
                    self.received += 1
                    high = max(high, _seq(payload))
                elif b'"t":"posted"' in payload:
                    self.posted += 1
                    high = max(high, _seq(payload))
                    out.append(post())
                elif b'"t":"error"' in payload:
                    self.errors += 1
                    out.append(post())
                    continue
                else:
                    continue
                events += 1
                if events % 64 == 0:
                    out.append(ws.frame(w.encode_frame(w.Ack(self.room, high)).encode()))
            if out:  # the frames one read calls for go out in one write
                await ws.send_raw(b"".join(out))


def _seq(payload: bytes) -> int:
    at = payload.index(b'"seq":') + 6
    return int(payload[at:payload.index(b",", at)])


async def _relay_rate(
    pid: int, port: int, clients: int, room_size: int, seconds: float, window: int,
    warm_up: float,
) -> tuple[float, float, tuple[float, float]]:
    members: list[_Member] = []
    async with trio.open_nursery() as nursery:
        conns: list[RelayClient] = []

        connecting = trio.CapacityLimiter(64)

        async def connect(stream_ready: trio.MemorySendChannel[RelayClient]) -> None:
            async with connecting:
                with trio.fail_after(60):
                    ws = await open_load_socket(port)
                # The test client's handshake and requests, over the load generator's socket.
                client = await handshake(ws, Identity(), "bench")  # type: ignore[arg-type]
                await client.ok(w.Resume(client.next_req(), {}))
            await stream_ready.send(client)

        send, receive = trio.open_memory_channel[RelayClient](0)
        for _ in range(clients):
            nursery.start_soon(connect, send.clone())
        for _ in range(clients):
            conns.append(await receive.receive())
        for r, first in enumerate(range(0, clients, room_size)):
            group = conns[first:first + room_size]
            room = f"bench-{room_size}-{r}"
            await pair_and_room(group[0], group[1], room)
            # Each newcomer is paired with and added by the member before it, so no identity
            # opens more than one pairing slot (the relay caps slots per identity: six at once).
            for inviter, other in itertools.pairwise(group[1:]):
                await _pair_and_add(inviter, other, room)
            members.extend(_Member(c, room, window) for c in group)
        for m in members:
            m.client.pushes.clear()
            nursery.start_soon(m.run)
        # Every client starts with a full window at once: with 500 clients 16 deep in rooms of
        # 20 that first burst is 150,000 pushes, and timing while it drains measured the burst
        # (about 10 ops/s), not the steady state. So wait until every client has had its first
        # window confirmed, then warm up.
        with trio.move_on_after(120):
            while min(m.posted for m in members) < window:  # noqa: ASYNC110 - bounded poll
                await trio.sleep(0.05)
        await trio.sleep(warm_up)
        p0, r0 = _totals(members)
        t0, cpu = trio.current_time(), _Cpu(pid)
        await trio.sleep(seconds)
        p1, r1 = _totals(members)
        elapsed = trio.current_time() - t0
        cores = cpu.cores()
        await close_all(c.ws for c in conns)
        nursery.cancel_scope.cancel()
    return (p1 - p0) / elapsed, (r1 - r0) / elapsed, cores


def _totals(members: list[_Member]) -> tuple[int, int]:
    errors = sum(m.errors for m in members)
    assert errors == 0, f"{errors} posts were refused"
    return sum(m.posted for m in members), sum(m.received for m in members)


async def _pair_and_add(owner: RelayClient, other: RelayClient, room: str) -> None:
    slot = await owner.ok(w.SlotOpen(owner.next_req()))
    assert isinstance(slot, w.Slot)
    await other.ok(w.SlotJoin(other.next_req(), slot.slot))
    me, them = owner.me, other.me
    await owner.ok(w.Add(owner.next_req(), room, them.ed_pub, them.x_pub, me.vouch(room, them)))
    await other.ok(w.Accept(other.next_req(), room))
    await owner.ok(w.SlotClose(owner.next_req(), slot.slot))


# --- memory --------------------------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _idle_memory(relay: RelayProcess, count: int) -> float:
    assert relay.proc is not None
    pid, port = relay.proc.pid, relay.port
    await trio.sleep(0.5)
    before = _rss_kib(pid)
    ready = 0
    sockets: list[WebSocketConnection] = []
    connecting = trio.CapacityLimiter(64)  # bounded connect storm: no handshake timeouts

    async def one() -> None:
        nonlocal ready
        async with contextlib.AsyncExitStack() as stack:
            async with connecting:
                ws = await stack.enter_async_context(open_ws(port, connect_within=60))
                await handshake(ws, Identity(), "idle")
            sockets.append(ws)
            ready += 1
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for _ in range(count):
            nursery.start_soon(one)
        with trio.fail_after(300):
            while ready < count:  # noqa: ASYNC110 - a bench progress poll, bounded above
                await trio.sleep(0.1)
        await trio.sleep(1.0)
        after = _rss_kib(pid)
        await close_all(sockets)
        nursery.cancel_scope.cancel()
    return (after - before) / count


# --- driver --------------------------------------------------------------------------------------


async def _bench(
    quick: bool, seconds: float, window: int, only: list[tuple[int, int, int]] | None = None,
    idle_memory: bool = True,
) -> dict[str, object]:
    # (clients, room size, posts in flight per client). Quick sizes only walk every path (one
    # room of two, several rooms of three, idle sockets). The window-1 rows are the pattern a
    # daemon's link keeps (one post in flight per room); deeper windows load the relay harder.
    loads = [(2, 2, window), (6, 3, 1)] if quick else [
        (2, 2, window), (50, 2, window), (50, 20, window), (500, 2, window), (500, 20, window),
        (500, 2, 1), (500, 20, 1),
    ]
    if only:
        loads = only
    idle = 20 if quick else 5000
    warm_up = 0.2 if quick else 1.0
    results: dict[str, object] = {
        "seconds": seconds, "window": window, "cpus": os.cpu_count(),
        "load_avg_1m_at_start": round(os.getloadavg()[0], 2), "runs": [],
    }
    echo_proc, echo_port = _start_echo()
    echo: dict[tuple[int, int], tuple[float, float, float]] = {}
    try:
        for clients, depth in sorted({(c, d) for c, _, d in loads}):
            progress(f"echo ceiling, {clients} clients, {depth} in flight each")
            echo[clients, depth] = await _echo_rate(
                echo_proc.pid, echo_port, clients, seconds, depth, warm_up
            )
    finally:
        echo_proc.send_signal(signal.SIGTERM)
        echo_proc.wait(timeout=10)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for clients, room_size, depth in loads:
            relay = RelayProcess(base / f"data-{clients}-{room_size}-{depth}",
                                 base / "relay.stderr", "--op-rate", "1000000", *MANY)
            relay.start()
            assert relay.proc is not None
            try:
                progress(f"relay, {clients} clients in rooms of {room_size}, {depth} in flight")
                ops, deliveries, (relay_cores, client_cores) = await _relay_rate(
                    relay.proc.pid, relay.port, clients, room_size, seconds, depth, warm_up
                )
            finally:
                relay.kill(signal.SIGTERM)
            ceiling, echo_cores, echo_client_cores = echo[clients, depth]
            run = {
                "clients": clients, "room_size": room_size, "window": depth,
                "ops_per_s": round(ops), "deliveries_per_s": round(deliveries),
                "echo_rt_per_s": round(ceiling), "ops_vs_echo": round(ops / ceiling, 2),
                "relay_cores": round(relay_cores, 2), "client_cores": round(client_cores, 2),
                "relay_cpu_us_per_op": round(1e6 * relay_cores / ops, 1) if ops else None,
                "echo_server_cores": round(echo_cores, 2),
                "echo_client_cores": round(echo_client_cores, 2),
            }
            print(json.dumps(run), file=sys.stderr, flush=True)
            results["runs"].append(run)  # type: ignore[attr-defined]
        if not idle_memory:
            return results
        progress(f"memory of {idle:,} idle connections")
        relay = RelayProcess(base / "data-idle", base / "relay.stderr", *MANY)
        relay.start()
        try:
            results["idle_connections"] = idle
            results["kib_per_idle_connection"] = round(await _idle_memory(relay, idle), 1)
        finally:
            relay.kill(signal.SIGTERM)
    return results


def _loads(text: str) -> list[tuple[int, int, int]]:
    runs = [tuple(int(n) for n in part.split("x")) for part in text.split(",")]
    if any(len(run) != 3 for run in runs):
        raise argparse.ArgumentTypeError("each run is CLIENTSxROOMxWINDOW, e.g. 500x20x1")
    return [(c, r, w) for c, r, w in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes: every path, briefly")
    parser.add_argument("--seconds", type=float, default=5.0, help="measuring time per run")
    parser.add_argument("--window", type=int, default=16, help="requests in flight per client")
    parser.add_argument("--loads", type=_loads, default=None, metavar="CxRxW,...",
                        help="only these runs: clients x room size x window, e.g. 500x20x1 "
                        "(no idle-memory figure)")
    parser.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo_server:
        trio.run(_echo_main)
        return
    started = time.monotonic()
    results = trio.run(_bench, args.quick, args.seconds, args.window, args.loads,
                       args.loads is None)
    results["wall_s"] = round(time.monotonic() - started, 1)
    results["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
