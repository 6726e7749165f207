"""Two stateless relay nodes in this process on one real nats-server, with node 1's view of a
unit held back (its stored messages wait, as in the RePublish delay), so a request on node 1 is
decided on a stale cache and loses its compare-and-set: what the client sees must not depend on
that."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from crosstalk.errors import StorageUnavailable
from crosstalk.wire import relay as w
from relay.nats_store import NatsStorage
from relay.node import NodeServer
from relay.storage import MemberPut, OpAppended, RoomPut, StoredOp, grant_key
from tests.relay.client import Identity, RelayClient, open_client, pair_and_room
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.test_nats_cluster import DROPPED
from tests.relay.test_storage import ALICE

pytestmark = pytest.mark.e2e

ROOM = "raced"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "nats")


@asynccontextmanager
async def two_nodes(url: str) -> AsyncIterator[tuple[NodeServer, int, NodeServer, int]]:
    seed = os.urandom(32)
    stores = [NatsStorage(url), NatsStorage(url)]
    try:
        one, two = NodeServer(stores[0], seed, node="one"), NodeServer(stores[1], seed, node="two")
        async with trio.open_nursery() as nursery:
            port1 = await nursery.start(one.serve, "127.0.0.1", 0)
            port2 = await nursery.start(two.serve, "127.0.0.1", 0)
            yield one, port1, two, port2
            nursery.cancel_scope.cancel()
    finally:
        for store in stores:
            store.close()


async def hold(node: NodeServer, unit: str) -> None:
    """From now on ``unit``'s stored messages wait at ``node`` (until it reloads the unit).
    A reload already under way there (say the one that began following a room when its
    member was invited) would end the hold, and take in what it should keep out, so the hold
    starts once none is (bounded by the test's ``fail_after``)."""
    await wait_until(lambda: node.reloading == 0)
    node._busy.setdefault(unit, [])


async def wait_known(node: NodeServer, unit: str, seq: int = 1) -> None:
    """Until ``node`` has seen ``unit`` stored through stream seq ``seq`` (bounded by the
    test's ``fail_after``)."""
    while True:
        if node.nats.tails.last.get(unit, 0) >= seq:
            return
        await trio.sleep(0.01)


async def wait_until(condition: Callable[[], bool]) -> None:
    """Until ``condition()`` holds (bounded by the test's ``fail_after``)."""
    while True:
        if condition():
            return
        await trio.sleep(0.01)


async def open_slot(owner: RelayClient, joiner: RelayClient) -> str:
    slot = await owner.ok(w.SlotOpen(owner.next_req()))
    assert isinstance(slot, w.Slot)
    await joiner.ok(w.SlotJoin(joiner.next_req(), slot.slot))
    await owner.push(w.SlotJoined)
    return slot.slot


async def test_a_part_that_made_the_owners_write_lose_still_reaches_the_owner(
    nats_server: NatsServer,
) -> None:
    """The joiner's part, stored through node 2, reaches node 1 only through the reload after
    the owner's own part lost its compare-and-set to it; the owner still gets it (before, it
    never did, and the inviter's pairing waited forever)."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, _, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                number = await open_slot(a, b)
                await hold(one, f"slot.{number}")
                await b.ok(w.SlotSend(b.next_req(), number, 0, b"joiner part 0"))
                await a.ok(w.SlotSend(a.next_req(), number, 0, b"owner part 0"))
                got = await a.push(w.SlotMsg)
                assert isinstance(got, w.SlotMsg)
                assert (got.from_side, got.index, got.data) == ("joiner", 0, b"joiner part 0")
                assert one.conflicts >= 1
                got = await b.push(w.SlotMsg)
                assert isinstance(got, w.SlotMsg)
                assert (got.from_side, got.index, got.data) == ("owner", 0, b"owner part 0")


async def test_an_add_that_spent_its_grant_and_lost_the_room_is_not_refused(
    nats_server: NatsServer,
) -> None:
    """alice's add of bob (allowed by their pairing grant) is decided on node 1 before it saw
    her own post through node 2, so the room's write loses; the retry must still find the
    grant (it was spent before the room's write, and the retry was refused ``forbidden``)."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, two, port2):
            async with (open_client(port1, alice) as a, open_client(port2, bob) as b,
                        open_client(port2, alice, device="dev-2") as a2):
                await open_slot(a, b)
                await a.ok(w.Create(a.next_req(), ROOM, alice.vouch(ROOM, alice)))
                await wait_known(two, f"r.{ROOM}")
                await hold(one, f"r.{ROOM}")
                await a2.ok(w.Post(a2.next_req(), ROOM, "op-1", b"sealed"))
                reply = await a.request(
                    w.Add(a.next_req(), ROOM, bob.ed_pub, bob.x_pub, alice.vouch(ROOM, bob)))
                assert not isinstance(reply, w.Error), reply
                assert one.conflicts >= 1
                await b.ok(w.Accept(b.next_req(), ROOM))


async def test_an_add_whose_room_won_and_whose_grant_lost_is_done_once(
    nats_server: NatsServer,
) -> None:
    """The room's write of alice's add wins on node 1, but its spending of the grant loses (a
    second pairing through node 2 put the grant again, unseen by node 1): the add is answered
    ok, not decided again (which said ``already_member``), and the grant is spent."""
    alice, bob = Identity(), Identity()
    grant = "grant.{}.{}".format(*grant_key(alice.fp, bob.fp))
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, _, port2):
            async with (open_client(port1, alice) as a, open_client(port2, bob) as b,
                        open_client(port2, alice, device="dev-2") as a2):
                await open_slot(a, b)
                await wait_known(one, grant)
                await hold(one, grant)
                await open_slot(a2, b)
                await a.ok(w.Create(a.next_req(), ROOM, alice.vouch(ROOM, alice)))
                reply = await a.request(
                    w.Add(a.next_req(), ROOM, bob.ed_pub, bob.x_pub, alice.vouch(ROOM, bob)))
                assert not isinstance(reply, w.Error), reply
                assert one.conflicts >= 1
    store = NatsStorage(nats_server.url)
    try:
        assert store.load().grants == []
    finally:
        store.close()


async def test_an_op_that_made_a_post_lose_still_reaches_the_poster(
    nats_server: NatsServer,
) -> None:
    """bob's post on node 2 is decided on a cache without alice's op (stored through node 1)
    and takes its seq; it loses, node 2 reloads the room, and bob must still get alice's op
    (the reload compared seqs only, so the op at bob's undecided seq was never pushed)."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (_, port1, two, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                await open_slot(a, b)
                await a.ok(w.Create(a.next_req(), ROOM, alice.vouch(ROOM, alice)))
                await a.ok(w.Add(a.next_req(), ROOM, bob.ed_pub, bob.x_pub,
                                 alice.vouch(ROOM, bob)))
                await b.ok(w.Accept(b.next_req(), ROOM))
                await a.push(w.Roster)
                await hold(two, f"r.{ROOM}")
                await a.ok(w.Post(a.next_req(), ROOM, "from-a", b"sealed-a"))
                await b.ok(w.Post(b.next_req(), ROOM, "from-b", b"sealed-b"))
                [op] = await b.ops(1)
                assert (op.seq, op.sender, op.body) == (1, alice.fp, b"sealed-a")
                assert two.conflicts >= 1
                [op] = await a.ops(1)
                assert (op.seq, op.sender, op.body) == (2, bob.fp, b"sealed-b")


async def test_an_op_owed_to_a_device_new_on_another_node_is_not_pruned(
    nats_server: NatsServer,
) -> None:
    """bob's second device says hello on node 1 (at head 0) and goes; node 2, which has not
    taken that in yet, stores bob's op 1 and his first device acknowledges it. Node 2 must not
    prune op 1 on what it knows (only the first device): the second device is owed it."""
    bob = Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, two, port2):
            async with open_client(port2, bob) as b:
                await b.ok(w.Create(b.next_req(), ROOM, bob.vouch(ROOM, bob)))
                await wait_known(one, f"r.{ROOM}")
                poke = two._poke
                two._poke = lambda: None  # type: ignore[method-assign]  # node 2 hears nothing
                async with open_client(port1, bob, device="dev-2"):
                    pass
                await b.ok(w.Post(b.next_req(), ROOM, "op-1", b"sealed-1"))
                await b.send(w.Ack(ROOM, 1))
                await b.ok(w.Post(b.next_req(), ROOM, "op-2", b"sealed-2"))
                # No one of the room is connected to node 1, so it does not take in its ops: the
                # hello below has it reload the room, as the stream holds it now.
                two._poke = poke  # type: ignore[method-assign]
                async with open_client(port1, bob, device="dev-2", resume={ROOM: 0}) as b2:
                    [room] = b2.resumed.rooms if b2.resumed else []
                    assert room.first == 1
                    ops = [f for f in b2.pushes if isinstance(f, w.Op)]
                    assert [op.seq for op in ops] == [1, 2]


async def test_a_device_first_seen_on_another_node_keeps_its_cursor(
    nats_server: NatsServer,
) -> None:
    """bob's second device says hello on node 1 (at head 0) and goes; bob posts op 1 through
    node 2, which has not taken the device in, and the device then comes to node 2. Node 2 must
    take the device's stored cursor, not register it again at its head (which skipped op 1)."""
    bob = Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, two, port2):
            async with open_client(port2, bob) as b:
                await b.ok(w.Create(b.next_req(), ROOM, bob.vouch(ROOM, bob)))
                await wait_known(one, f"r.{ROOM}")
                poke = two._poke
                two._poke = lambda: None  # type: ignore[method-assign]  # node 2 hears nothing
                async with open_client(port1, bob, device="dev-2"):
                    pass
                await b.ok(w.Post(b.next_req(), ROOM, "op-1", b"sealed-1"))
                async with open_client(port2, bob, device="dev-2", resume={ROOM: 0}) as b2:
                    ops = [f for f in b2.pushes if isinstance(f, w.Op)]
                    assert [op.seq for op in ops] == [1]
                two._poke = poke  # type: ignore[method-assign]


async def test_a_resume_replays_no_op_whose_write_failed(nats_server: NatsServer) -> None:
    """alice's post on node 1 fails in NATS (outcome unknown) and node 1 cannot reload the room
    yet, so its cache still holds the op; bob resuming there meanwhile must not be sent it (the
    fault tests saw such an op, then the stored one at its seq), and once NATS answers again he
    gets what is stored, once."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, _, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                await pair_and_room(a, b, ROOM)
                await a.ok(w.Post(a.next_req(), ROOM, "stored", b"sealed-1"))

                async def no_answer(*_: object) -> None:
                    raise StorageUnavailable("no answer (planted)")

                one.nats.acommit = no_answer  # type: ignore[method-assign]
                one.nats.areload = no_answer  # type: ignore[method-assign,assignment]
                await a.send(w.Post(a.next_req(), ROOM, "undecided", b"sealed-2"))
                await wait_until(lambda: f"r.{ROOM}" in one._stale)
                got: list[w.RelayFrame] = []
                try:
                    async with open_client(port1, bob, resume={ROOM: 0}) as b2:
                        got = b2.pushes
                except* DROPPED:
                    pass  # the node could not say what is stored, and said so by closing
                assert "undecided" not in [f.op_id for f in got if isinstance(f, w.Op)]
                del one.nats.acommit, one.nats.areload
                # Its reload is retried in the background.
                await wait_until(lambda: f"r.{ROOM}" not in one._stale)
                async with open_client(port1, bob, resume={ROOM: 0}) as b2:
                    ops = [f for f in b2.pushes if isinstance(f, w.Op)]
                    assert [(op.seq, op.op_id) for op in ops] == [(1, "stored")]


async def test_a_node_forgets_ops_pruned_on_another_node(nats_server: NatsServer) -> None:
    """alice's ops are written through node 1 and acknowledged by everyone through node 2,
    which prunes them: node 1 must forget them too (it kept an entry for every op it ever
    wrote, and walked them all at each acknowledgement)."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, two, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                await pair_and_room(a, b, ROOM)
                for i in range(5):
                    await a.ok(w.Post(a.next_req(), ROOM, f"op-{i}", b"sealed"))
                await b.ops(5)
                await b.send(w.Ack(ROOM, 5))
                async with open_client(port2, alice) as a2:
                    await a2.send(w.Ack(ROOM, 5))
                    # Node 2 pruned (it keeps at most the newest op, the room's head) ...
                    await wait_until(lambda: all(seq == 5 for seq in two.nats.tails.ops[ROOM]))
                # ... and node 1 hears of it.
                await wait_until(lambda: not any(seq < 5 for seq in one.nats.tails.ops[ROOM]))


async def test_a_write_stored_between_a_nodes_load_and_its_feed_reaches_it(
    nats_server: NatsServer,
) -> None:
    """The feed subscribes only once the node runs, after its load: an op stored in between
    never comes through the feed, so the node must see the stream moved on and reload (else
    its cache of the room stays behind until the room's next write)."""
    writer = NatsStorage(nats_server.url)
    store = NatsStorage(nats_server.url)
    try:
        writer.commit([RoomPut(ROOM), MemberPut(ROOM, ALICE)])
        node = NodeServer(store, os.urandom(32), node="late")
        loaded = store.tails.last[f"r.{ROOM}"]
        writer.commit([OpAppended(ROOM, StoredOp(1, ALICE.fingerprint, "gap", b"x", 1.0))])
        assert writer.tails.last[f"r.{ROOM}"] > loaded
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                await nursery.start(node.serve, "127.0.0.1", 0)
                await wait_known(node, f"r.{ROOM}", writer.tails.last[f"r.{ROOM}"])
                nursery.cancel_scope.cancel()
    finally:
        writer.close()
        store.close()
