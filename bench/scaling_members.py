"""The members-per-room curve: a room of 2 → 200 fake clients at one relay, built and posted to.

Run: ``python -m bench.scaling_members [--sizes 2,10,50,200] [--posts 20] [--base DIR]
[--rounds N] [--json]``; ``python -m bench.scaling`` runs it as its first curve.

A fresh relay process per point; that many fake clients (``tests.relay.client`` over
:class:`bench._wsload.LoadSocket`: real handshakes, real frames) in one room, each added by the
previous one through a pairing slot (*building*: slot open and join, add, accept, slot close;
five commits, each with its fsync; the add and accept alone are what a daemon's room invite and
accept cost once pairing is done, as ``bench.big_room`` times its build). One member then posts
200-byte ops one at a time; latency is until the *last* other member has the push. Also: the
relay's CPU seconds for the build and per post (its acknowledgements included), the build's
commits, this process's CPU for the build and per post (the fake members' receiving), the
relay's RSS growth over its idle start, and one WAL commit (``synchronous=FULL``, as the relay
commits) timed alone in the relay's data directory after the point: the build's floor is its
commits one after another.

``--base DIR`` runs every point twice, on a relay from ``DIR`` (e.g. ``git archive dcb9870 |
tar -x -C DIR``) and on one from this tree, alternating which goes first, with the same fake
clients (this tree's): an A/B of the relay alone, on the same machine at the same time.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nacl.utils
import trio
from trio_websocket import ConnectionClosed

from bench._common import (
    MANY,
    commit_times,
    cpu_seconds,
    percentile,
    progress,
    rss_kib,
    summary_ms,
)
from bench._wsload import LoadSocket, open_load_socket
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState
from tests.relay.client import Identity, RelayClient, handshake, pair_and_room
from tests.relay.process import ROOT, RelayProcess

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

    WARM = 3  # ops sent before the timed ones (the first waits behind the build's pushes)

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
            for i in range(count + self.WARM):
                op_id, done = f"fan-{nacl.utils.random(8).hex()}", trio.Event()
                self.waiting[op_id.encode()] = (len(self.members) - 1, done)
                start = time.perf_counter()
                await poster.send(w.Post(poster.next_req(), self.room, op_id, BODY))
                # The first op waits behind every roster/presence push of the room's build.
                with trio.fail_after(30 if i else 240):
                    await done.wait()
                if i >= self.WARM:
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


async def _build_room(members: list[RelayClient], room: str) -> float:
    """Pair the first two into ``room``, then each member adds the next through a slot; the
    seconds of it spent adding and accepting (what a daemon's room invite and accept cost,
    pairing done)."""
    joining_s = 0.0
    async with trio.open_nursery() as nursery:
        parked = Parked(nursery)
        for client in members[2:]:
            await parked.park(client)
        await pair_and_room(members[0], members[1], room)
        history = await members[1].history(room)
        await parked.park(members[0])
        for previous, joining in itertools.pairwise(members[1:]):
            parked.unpark(joining)
            joining_s += await _pair_and_add(previous, joining, history)
            await parked.park(previous)
        nursery.cancel_scope.cancel()
    return joining_s


async def _pair_and_add(owner: RelayClient, other: RelayClient, history: ChainState) -> float:
    """``owner`` pairs with ``other`` and adds it to the room of ``history``; ``other`` accepts.
    Returns the seconds from the add to the accept's answer.

    The statements are signed on ``history``, kept here as the room grows, as a daemon keeps
    its rooms' (it asks the relay only for what it lacks). The test client asks for the whole
    history at each change: building a room of 200 that way spent 12 of its 15 s of CPU in
    this process fetching and hashing histories of up to 400 statements, twice per member.
    """
    room, me, them = history.room, owner.me, other.me
    slot = await owner.ok(w.SlotOpen(owner.next_req()))
    assert isinstance(slot, w.Slot)
    await other.ok(w.SlotJoin(other.next_req(), slot.slot))
    start = time.perf_counter()
    invite = me.statement(history, "invite", them.fp, them.ed_pub, them.x_pub)
    await owner.ok(w.Add(owner.next_req(), room, them.ed_pub, them.x_pub, me.vouch(room, them),
                         invite))
    history.append(invite, verify=False)
    accept = them.statement(history, "accept", them.fp)
    await other.ok(w.Accept(other.next_req(), room, accept))
    history.append(accept, verify=False)
    joined = time.perf_counter() - start
    await owner.ok(w.SlotClose(owner.next_req(), slot.slot))
    return joined


async def _members_point(relay: RelayProcess, size: int, posts: int) -> dict[str, Any]:
    assert relay.proc is not None
    pid = relay.proc.pid
    await _commits(relay.port)  # its first /metrics answer grows the relay by ~1.4 MB
    await trio.sleep(0.3)
    before = rss_kib(pid)
    async with open_load_clients(relay.port, size) as members:
        room = f"members-{size}"
        commits = await _commits(relay.port)
        cpu, ours, start = cpu_seconds(pid), cpu_seconds(), time.perf_counter()
        joining = await _build_room(members, room)
        build, build_cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu
        ours = cpu_seconds() - ours
        commits = await _commits(relay.port) - commits
        for client in members:
            client.pushes.clear()
        grown = rss_kib(pid) - before
        cpu, ours = cpu_seconds(pid), cpu_seconds()
        latency = await FanOut(members, room).samples(posts)
        per_post = (cpu_seconds(pid) - cpu) / (posts + FanOut.WARM)
        ours_per_post = (cpu_seconds() - ours) / (posts + FanOut.WARM)
    return {"x": size, "latency": summary_ms(latency), "rss_growth_kib": grown,
            "build_s": round(build, 2), "build_relay_cpu_s": round(build_cpu, 2),
            "build_bench_cpu_s": round(ours, 2), "build_commits": commits,
            "build_add_accept_s": round(joining, 2),
            "relay_cpu_per_post_ms": round(per_post * 1000, 2),
            "bench_cpu_per_post_ms": round(ours_per_post * 1000, 2)}


async def _commits(port: int) -> int:
    """The relay's storage transactions so far, from its ``/metrics``."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := await stream.receive_some(1 << 16):
            answer += chunk
    for line in answer.decode().splitlines():
        if line.startswith("crosstalk_relay_commits_total "):
            return int(float(line.split()[1]))
    raise RuntimeError("the relay's /metrics has no commit count")


def members_point(size: int, posts: int, workdir: Path, tree: Path = ROOT) -> dict[str, Any]:
    """One point on a fresh relay process run from ``tree``."""
    stderr = workdir / f"relay-members-{size}.stderr"
    data = Path(tempfile.mkdtemp(prefix=f"members-{size}-", dir=workdir))
    relay = RelayProcess(data, stderr, *FAST, tree=tree)
    relay.start()
    try:
        point = trio.run(_members_point, relay, size, posts)
        # The build's floor: its commits one after another, each one WAL commit at least.
        point["commit_p50_ms"] = round(1000 * percentile(commit_times(data, 50), 0.5), 3)
        return point
    except (trio.TooSlowError, ConnectionClosed, RuntimeError, ExceptionGroup) as exc:
        # A size the relay cannot carry is a finding, not a crash of the whole curve.
        slow = stderr.read_text().count("closing a slow consumer")
        return {"x": size, "error": f"{_leaf(exc)}; the relay closed {slow} connection(s) as "
                                    "slow consumers"}
    finally:
        relay.kill(signal.SIGTERM)


def members_per_room(sizes: list[int], posts: int, workdir: Path) -> list[dict[str, Any]]:
    """One point per room size, each on a fresh relay process."""
    points = []
    for size in sizes:
        progress(f"members per room: {size}")
        points.append(members_point(size, posts, workdir))
    return points


def a_b(sizes: list[int], posts: int, base: Path, rounds: int) -> dict[str, Any]:
    """Every point on a relay from ``base`` and one from this tree, alternately, ``rounds``
    times; each side's points per round, and per size the medians over the rounds."""
    trees = {"base": base.resolve(), "this": ROOT}
    runs: dict[str, list[list[dict[str, Any]]]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="cts-", dir="/tmp") as tmp:
        for r in range(rounds):
            for side in runs:
                runs[side].append([])
            for i, size in enumerate(sizes):
                order = ("base", "this") if (r + i) % 2 == 0 else ("this", "base")
                for side in order:
                    progress(f"members per room: {size}, {side} relay, round {r + 1}")
                    runs[side][r].append(members_point(size, posts, Path(tmp), trees[side]))
    return {"rounds": runs, "median": {side: _medians(points) for side, points in runs.items()}}


MEDIAN_KEYS = ("build_s", "build_add_accept_s", "build_relay_cpu_s", "build_bench_cpu_s",
               "build_commits", "relay_cpu_per_post_ms", "rss_growth_kib")
OPTIONAL_KEYS = ("bench_cpu_per_post_ms", "commit_p50_ms")  # not in a base tree's older runs


def _medians(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Per size, the median of each figure over the rounds that measured it."""
    out = []
    for at in zip(*rounds, strict=True):
        ok = [p for p in at if "error" not in p]
        point: dict[str, Any] = {"x": at[0]["x"], "rounds": len(ok)}
        if ok:
            point.update({k: round(statistics.median(p[k] for p in ok), 2) for k in MEDIAN_KEYS})
            point.update({k: round(statistics.median(p[k] for p in ok), 3)
                          for k in OPTIONAL_KEYS if all(k in p for p in ok)})
            for q in ("p50_ms", "p99_ms"):
                point[q] = round(statistics.median(p["latency"][q] for p in ok), 2)
        out.append(point)
    return out


def _leaf(exc: BaseException) -> str:
    """The first plain exception inside (nested) exception groups, as ``Type: message``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,10,50,200")
    parser.add_argument("--posts", type=int, default=20)
    parser.add_argument("--base", type=Path, help="a source tree whose relay to compare with")
    parser.add_argument("--rounds", type=int, default=1, help="with --base: A/B rounds")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.base is not None:
        result: Any = a_b(sizes, args.posts, args.base, args.rounds)
    else:
        with tempfile.TemporaryDirectory(prefix="cts-", dir="/tmp") as tmp:
            result = members_per_room(sizes, args.posts, Path(tmp))
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
