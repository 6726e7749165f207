"""Faults under load on stateless relay nodes: a three-server NATS cluster with the stream at R3
(kill -9 its leader, kill -9 a follower, SIGSTOP the leader), and kill -9 of a relay node.

Every scenario ends with the same check: a member who never acknowledged anything resumes from
the start of the room and gets each posted op exactly once, at seqs 1..N with no gap, and every
seq a poster was answered with is the one the op holds. Posters retry on their own: a dropped
connection or a refusal is answered by reconnecting (to any live node) and re-sending the same
op id, as a daemon's outbox does. Every wait is bounded and every process is stopped by its pid.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import nats
import pytest
import trio

from crosstalk.wire import relay as w
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.nats_process import NatsCluster, NatsServer, running_cluster, running_nats
from tests.relay.process import RelayProcess
from tests.relay.test_nats_cluster import DROPPED, retry

pytestmark = pytest.mark.e2e

ROOM = "load"
STREAM = "crosstalk_rooms"
OPS = 60  # per poster
FAULT_AT = 15  # the fault comes once the first poster has this many posts answered


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsCluster]:
    yield from running_cluster(tmp_path / "nats")


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "single")


async def on_nats(url: str, work: Callable[[nats.NATS], Awaitable[str]]) -> str:
    """Run ``work`` with a NATS connection, on a thread with its own asyncio loop."""

    async def session() -> str:
        nc = await nats.connect(url.split(","), connect_timeout=2, max_reconnect_attempts=2)
        try:
            return await work(nc)
        finally:
            await nc.close()

    result: str = await trio.to_thread.run_sync(asyncio.run, session())
    return result


async def stream_leader(url: str) -> str:
    """The server name leading ``STREAM`` (retried while an election is under way)."""

    async def leader(nc: nats.NATS) -> str:
        for _ in range(100):
            try:
                info = await nc.jetstream(timeout=2).stream_info(STREAM)
                if info.cluster is not None and info.cluster.leader:
                    return str(info.cluster.leader)
            except (nats.errors.Error, TimeoutError):
                pass
            await asyncio.sleep(0.1)  # polling a condition, bounded by the loop
        raise AssertionError("the stream has no leader")

    return await on_nats(url, leader)


async def jetstream_ready(url: str) -> str:
    """Until the cluster's JetStream answers (it has a meta leader)."""

    async def ready(nc: nats.NATS) -> str:
        for _ in range(300):
            try:
                await nc.jetstream(timeout=2).account_info()
                return "ready"
            except (nats.errors.Error, TimeoutError):
                await asyncio.sleep(0.1)  # polling a condition, bounded by the loop
        raise AssertionError("JetStream did not become ready")

    return await on_nats(url, ready)


def start_nodes(tmp_path: Path, url: str, count: int, replicas: int = 3) -> list[RelayProcess]:
    """``count`` relay nodes sharing one key, on every server of ``url``."""
    nodes = []
    for i in range(count):
        data = tmp_path / f"relay{i + 1}"
        if i:
            data.mkdir(mode=0o700)
            shutil.copy2(tmp_path / "relay1" / "relay.key", data / "relay.key")
        node = RelayProcess(data, tmp_path / f"relay{i + 1}.stderr", "--nats", url,
                            "--nats-replicas", str(replicas))
        nodes.append(node)
        node.start(timeout=60)
    return nodes


class Poster:
    """Posts ``OPS`` ops in order, each until answered ``posted``, reconnecting as needed.

    ``ports()`` names the nodes it may use, in the order it tries them; ``answered`` maps each
    op id to the seq it was answered with; ``reconnects`` counts the connections it had to open
    after the first.
    """

    def __init__(self, me: Identity, name: str, ports: Callable[[], list[int]]) -> None:
        self.me = me
        self.name = name
        self.ports = ports
        self.answered: dict[str, int] = {}
        self.reconnects = -1
        self.progress = trio.Event()

    def op_ids(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(OPS)]

    async def run(self) -> None:
        pending = self.op_ids()
        turn = 0
        while pending:
            port = self.ports()[turn % len(self.ports())]
            turn += 1
            self.reconnects += 1
            try:
                async with open_client(port, self.me) as client:
                    while pending:
                        if not await self._post(client, pending[0]):
                            break
                        pending.pop(0)
            except* (*DROPPED, trio.TooSlowError):
                pass

    async def _post(self, client: RelayClient, op_id: str) -> bool:
        with trio.fail_after(15):  # a stalled node: reconnect elsewhere
            reply = await client.request(w.Post(client.next_req(), ROOM, op_id, op_id.encode()))
        if isinstance(reply, w.Error):
            return False  # refused for now (the storage stalled): reconnect and re-send
        assert isinstance(reply, w.Posted), reply
        self.answered[op_id] = reply.seq
        self.progress.set()
        self.progress = trio.Event()
        return True


async def wait_answered(poster: Poster, count: int) -> None:
    while len(poster.answered) < count:
        await poster.progress.wait()


async def prepare_room(port: int, members: list[Identity], reader: Identity) -> None:
    """Every poster and the reader joined in ``ROOM`` (made through the first poster)."""
    owner = members[0]
    async with open_client(port, owner) as a:
        for other in [*members[1:], reader]:
            async with open_client(port, other) as b:
                if other is members[1] or (len(members) == 1 and other is reader):
                    await pair_and_room(a, b, ROOM)
                else:
                    slot = await a.ok(w.SlotOpen(a.next_req()))
                    assert isinstance(slot, w.Slot)
                    await b.ok(w.SlotJoin(b.next_req(), slot.slot))
                    await a.ok(w.Add(a.next_req(), ROOM, other.ed_pub, other.x_pub,
                                     owner.vouch(ROOM, other)))
                    await b.ok(w.Accept(b.next_req(), ROOM))
                    await a.ok(w.SlotClose(a.next_req(), slot.slot))


async def check_log(ports: list[int], reader: Identity, posters: list[Poster]) -> None:
    """The reader, who never acknowledged, resumes from 0: every op once, seqs 1..N, and each
    at the seq its poster was answered with."""
    expected = {op_id for p in posters for op_id in p.op_ids()}
    got: list[w.Op] = []

    async def read_all() -> bool:
        got.clear()
        async with open_client(ports[0], reader, resume={ROOM: 0}) as client:
            while len(got) < len(expected):
                op = await client.push(w.Op)
                assert isinstance(op, w.Op)
                got.append(op)
        return True

    await retry(read_all, within=60)
    ids = [op.op_id for op in got]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert [op.seq for op in got] == list(range(1, len(expected) + 1)), (twice, ids)
    assert not twice and set(ids) == expected, (twice, sorted(expected - set(ids)))
    held = {op.op_id: op.seq for op in got}
    for poster in posters:
        assert poster.answered == {op_id: held[op_id] for op_id in poster.op_ids()}


async def run_fault(
    tmp_path: Path, cluster: NatsCluster, fault: Callable[[], Awaitable[None]],
    recover: Callable[[], Awaitable[None]],
) -> None:
    """Two relay nodes, a poster on each; ``fault`` once the load runs, ``recover`` after more
    posts were answered; then everything must be in the log once."""
    await jetstream_ready(cluster.url)
    nodes = start_nodes(tmp_path, cluster.url, 2)
    try:
        ports = [n.port for n in nodes]
        alice, bob, reader = Identity(), Identity(), Identity()
        with trio.fail_after(30):
            await prepare_room(ports[0], [alice, bob], reader)
        posters = [Poster(alice, "a", lambda: ports), Poster(bob, "b", lambda: ports[::-1])]
        with trio.fail_after(150):
            async with trio.open_nursery() as nursery:
                for poster in posters:
                    nursery.start_soon(poster.run)
                await wait_answered(posters[0], FAULT_AT)
                await fault()
                await wait_answered(posters[0], FAULT_AT + 10)
                await recover()
            await check_log(ports, reader, posters)
    finally:
        for node in nodes:
            node.kill(signal.SIGTERM)


async def test_kill_9_of_the_stream_leader_under_load_loses_and_repeats_nothing(
    tmp_path: Path, cluster: NatsCluster
) -> None:
    """The R3 stream's leader dies mid-load; a new one is elected, posts carry on, the dead
    server comes back and catches up."""
    killed: list[str] = []

    async def fault() -> None:
        killed.append(await stream_leader(cluster.url))
        cluster.member(killed[0]).kill()

    async def recover() -> None:
        await trio.to_thread.run_sync(cluster.member(killed[0]).start)

    await run_fault(tmp_path, cluster, fault, recover)


async def test_kill_9_of_a_stream_follower_under_load_loses_and_repeats_nothing(
    tmp_path: Path, cluster: NatsCluster
) -> None:
    """A follower of the R3 stream dies mid-load and comes back."""
    killed: list[str] = []

    async def fault() -> None:
        leader = await stream_leader(cluster.url)
        killed.append(next(m.name for m in cluster.members if m.name != leader))
        cluster.member(killed[0]).kill()

    async def recover() -> None:
        await trio.to_thread.run_sync(cluster.member(killed[0]).start)

    await run_fault(tmp_path, cluster, fault, recover)


async def test_sigstop_of_the_stream_leader_under_load_loses_and_repeats_nothing(
    tmp_path: Path, cluster: NatsCluster
) -> None:
    """The stream's leader freezes (SIGSTOP) mid-load: the others elect a new one; when it
    wakes (SIGCONT) it steps down and catches up."""
    stopped: list[str] = []

    async def fault() -> None:
        stopped.append(await stream_leader(cluster.url))
        cluster.member(stopped[0]).signal(signal.SIGSTOP)

    async def recover() -> None:
        cluster.member(stopped[0]).signal(signal.SIGCONT)

    await run_fault(tmp_path, cluster, fault, recover)


async def test_kill_9_of_a_relay_node_under_load_moves_its_clients_and_leaves_the_others_be(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Node 1 dies mid-load: Alice's poster moves to node 2 and re-sends; Bob, on node 2 all
    along, never loses his connection nor has a post refused; every op is in the log once."""
    nodes = start_nodes(tmp_path, nats_server.url, 2, replicas=1)
    try:
        ports = [n.port for n in nodes]
        alice, bob, reader = Identity(), Identity(), Identity()
        with trio.fail_after(30):
            await prepare_room(ports[0], [alice, bob], reader)
        moving = Poster(alice, "a", lambda: ports)
        staying = Poster(bob, "b", lambda: ports[1:])
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(moving.run)
                nursery.start_soon(staying.run)
                await wait_answered(moving, FAULT_AT)
                nodes[0].kill(signal.SIGKILL)
            await check_log(ports[1:], reader, [moving, staying])
        assert moving.reconnects >= 1
        assert staying.reconnects == 0
    finally:
        for node in nodes:
            node.kill(signal.SIGTERM)
