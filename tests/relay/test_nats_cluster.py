"""Two real stateless relay processes on one real nats-server: any node serves any client."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError

from crosstalk.wire import relay as w
from relay.main import NODE_BEAT_ENV
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e

T = TypeVar("T")
DROPPED = (ConnectionClosed, HandshakeError, OSError, trio.BrokenResourceError)
ROOM = "shared"
QUIET = 2.0  # seconds without a push after which the ops in flight have come, or will not
NODE_BEAT = 2.0  # the nodes' presence beat (CROSSTALK_RELAY_NODE_BEAT; 5 s by default)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "nats")


@pytest.fixture
def nodes(tmp_path: Path, nats_server: NatsServer) -> Iterator[tuple[RelayProcess, RelayProcess]]:
    """Node 1 starts first (and records the relay key); node 2 gets a copy of its key."""
    # Presence beats every 2 s (a dead node's clients offline 6 s after its last, not 15 s).
    beat = {NODE_BEAT_ENV: str(NODE_BEAT)}
    one = RelayProcess(tmp_path / "n1", tmp_path / "n1.stderr", "--nats", nats_server.url,
                       env=beat)
    two = RelayProcess(tmp_path / "n2", tmp_path / "n2.stderr", "--nats", nats_server.url,
                       env=beat)
    one.start()
    try:
        (tmp_path / "n2").mkdir(mode=0o700)
        shutil.copy2(tmp_path / "n1" / "relay.key", tmp_path / "n2" / "relay.key")
        two.start()
        try:
            yield one, two
        finally:
            two.kill(signal.SIGTERM)
    finally:
        one.kill(signal.SIGTERM)


async def retry(attempt: Callable[[], Awaitable[T | None]], within: float) -> T:
    """Run ``attempt`` until it returns a value; each try is bounded, and so is the whole."""
    with trio.fail_after(within):
        while True:
            result: T | None = None
            with trio.move_on_after(5):
                try:
                    result = await attempt()
                except* DROPPED:
                    pass
            if result is not None:
                return result
            await trio.sleep(0.25)  # a node is failing over; poll again


async def test_clients_on_different_nodes_pair_share_a_room_and_exchange_ops(
    nodes: tuple[RelayProcess, RelayProcess],
) -> None:
    """Alice on node 1 and Bob on node 2 pair by slot, share a room and get each other's ops."""
    one, two = nodes
    alice, bob = Identity(), Identity()
    assert one.pubkey == two.pubkey
    with trio.fail_after(30):
        async with open_client(one.port, alice) as a, open_client(two.port, bob) as b:
            await pair_and_room(a, b, ROOM)
            await a.ok(w.Post(a.next_req(), ROOM, "from-a", b"sealed-a"))
            [op] = await b.ops(1)
            assert (op.seq, op.sender, op.body) == (1, alice.fp, b"sealed-a")
            await b.ok(w.Post(b.next_req(), ROOM, "from-b", b"sealed-b"))
            [op] = await a.ops(1)
            assert (op.seq, op.sender, op.body) == (2, bob.fp, b"sealed-b")
            listed = await b.ok(w.ListRooms(b.next_req()))
            assert isinstance(listed, w.RoomList)
            assert listed.rooms == [w.RoomEntry(ROOM, "joined")]
            roster = await a.ok(w.GetRoster(a.next_req(), ROOM))
            assert isinstance(roster, w.Roster)
            assert {m.fingerprint: m.state for m in roster.members} == {
                alice.fp: "joined", bob.fp: "joined"}


async def test_kill_9_of_a_node_mid_stream_loses_and_duplicates_nothing(
    nodes: tuple[RelayProcess, RelayProcess],
) -> None:
    """Node 1 dies with posts in flight; both clients resume on node 2; every seq arrives once."""
    one, two = nodes
    alice, bob = Identity(), Identity()
    got: list[w.Op] = []
    with trio.fail_after(60):
        try:
            async with open_client(one.port, alice) as a:
                async with open_client(two.port, bob) as b:
                    await pair_and_room(a, b, ROOM)
                    for i in range(20):
                        await a.ok(w.Post(a.next_req(), ROOM, f"o{i}", b"sealed-%d" % i))
                    got.extend(await b.ops(20))
                    for i in range(20, 30):  # in flight when the node dies
                        await a.send(w.Post(a.next_req(), ROOM, f"o{i}", b"sealed-%d" % i))
                    one.kill(signal.SIGKILL)
                    with trio.move_on_after(15):
                        while True:  # Bob stays connected: node 2 carries on alone
                            # Until the pushes stop: what node 2 has not pushed by then, Bob
                            # resumes below (this waited out all 15 s every time).
                            with trio.move_on_after(QUIET) as quiet:
                                op = await b.push(w.Op)
                            if quiet.cancelled_caught:
                                break
                            assert isinstance(op, w.Op)
                            got.append(op)
        except* DROPPED:
            pass

        async def repost() -> list[int]:
            async with open_client(two.port, alice) as a:
                seqs = []
                for i in range(20, 30):  # the same op ids: stored once whatever got through
                    posted = await a.ok(w.Post(a.next_req(), ROOM, f"o{i}", b"sealed-%d" % i))
                    assert isinstance(posted, w.Posted)
                    seqs.append(posted.seq)
                return seqs

        reposted = await retry(repost, within=30)

        async def catch_up() -> bool:
            cursor = max(op.seq for op in got)
            async with open_client(two.port, bob, resume={ROOM: cursor}) as b:
                while len(got) < 30:
                    op = await b.push(w.Op)
                    assert isinstance(op, w.Op)
                    got.append(op)
            return True

        await retry(catch_up, within=30)
    seqs = [op.seq for op in got]
    assert seqs == list(range(1, 31))
    assert [op.op_id for op in got] == [f"o{i}" for i in range(30)]
    assert reposted == list(range(21, 31))


async def online(client: RelayClient, who: Identity) -> None:
    """Until ``client`` is told ``who`` is online."""
    while True:
        presence = await client.push(w.Presence)
        assert isinstance(presence, w.Presence)
        if presence.fingerprint == who.fp and presence.online:
            return


async def test_a_dead_node_s_clients_go_offline_for_their_peers(
    nodes: tuple[RelayProcess, RelayProcess],
) -> None:
    """kill -9 of node 2 once Bob's presence reached Alice: node 2's announcements stop and Bob
    goes offline at node 1 (after the node's presence timeout)."""
    one, two = nodes
    alice, bob = Identity(), Identity()
    with trio.fail_after(45):
        async with open_client(one.port, alice) as a:
            try:
                async with open_client(two.port, bob) as b:
                    await pair_and_room(a, b, ROOM)
                    await online(a, bob)
                    two.kill(signal.SIGKILL)
            except* DROPPED:
                pass
            while True:
                presence = await a.push(w.Presence)
                assert isinstance(presence, w.Presence)
                if presence.fingerprint == bob.fp and not presence.online:
                    break


async def test_members_newly_sharing_a_room_through_another_node_see_each_other_online(
    nodes: tuple[RelayProcess, RelayProcess],
) -> None:
    """Node 1 knows Bob (node 2) is online before Alice (node 1) shares a room with him; when
    Bob accepts on node 2, node 1 tells Alice he is online without anyone reconnecting."""
    one, two = nodes
    alice, bob, carol = Identity(), Identity(), Identity()
    with trio.fail_after(30):
        async with open_client(one.port, carol) as c, open_client(two.port, bob) as b:
            await pair_and_room(c, b, "first")
            await online(c, bob)  # node 1 has heard node 2 announce Bob
            async with open_client(one.port, alice) as a:
                await pair_and_room(a, b, ROOM)
                await online(a, bob)


def test_a_node_with_another_relay_key_refuses_to_join(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """Clients pin the relay key, so a node whose key differs from the cluster's does not start."""
    one = RelayProcess(tmp_path / "n1", tmp_path / "n1.stderr", "--nats", nats_server.url)
    other = RelayProcess(tmp_path / "n3", tmp_path / "n3.stderr", "--nats", nats_server.url)
    one.start()
    try:
        with pytest.raises(RuntimeError, match=r"did not start: .*relay key differs"):
            other.start()
    finally:
        other.kill()
        one.kill(signal.SIGTERM)
