"""What a relay node's feed costs: its own writes' echo is dropped before it is parsed, the
prune limit is found from the newest op taken in, not by walking every op held, and posts
queued behind one another are one stored message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from crosstalk.wire import relay as w
from tests.relay.client import Identity, open_client, pair_and_room
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.test_nats_node_races import two_nodes, wait_until

pytestmark = pytest.mark.e2e

ROOM = "fed"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "nats")


async def test_a_nodes_own_writes_come_back_and_are_dropped_unparsed(
    nats_server: NatsServer,
) -> None:
    """Every op a node stored comes back to it through RePublish (the node follows the room)
    and takes the early drop on its sequence alone, with the tails the node loaded at start
    (a test against the tails it had before its load never matched)."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, _two, _port2):
            async with open_client(port1, alice) as a, open_client(port1, bob) as b:
                await pair_and_room(a, b, ROOM)
                before = one.echoes
                for n in range(5):
                    await a.ok(w.Post(a.next_req(), ROOM, f"op-{n}", b"sealed"))
                last = one.nats.tails.last[f"r.{ROOM}"]
                await wait_until(lambda: one.fed_through >= last)
                assert one.echoes - before >= 5


async def test_the_prune_limit_is_the_newest_op_the_feed_took_in(
    nats_server: NatsServer,
) -> None:
    """An op this node stored but whose echo has not come back yet is not prunable (a device
    registered elsewhere before it may not be known here yet); every op before it is."""
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, _port1, _two, _port2):
            one.nats.tails.ops["r0"] = {1: 100, 2: 101, 3: 103, 4: 104}
            one.fed_through = 103
            assert one._prunable("r0") == 3
            one.fed_through = 99
            assert one._prunable("r0") == 0
            one.fed_through = 200
            assert one._prunable("r0") == 4
            assert one._prunable("not-held") == 1 << 62


async def test_posts_queued_behind_one_another_are_stored_as_one_message(
    nats_server: NatsServer,
) -> None:
    """Posts a client sent while its room was being written at its node are decided together
    and stored as one message under one compare-and-set; the other node takes in every op of
    that message, in order, and pushes them to its client."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (one, port1, _two, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                await pair_and_room(a, b, ROOM)
                async with one._lock(f"r.{ROOM}"):  # as if a write of the room were in flight
                    for n in range(8):
                        await a.send(w.Post(a.next_req(), ROOM, f"op-{n}", b"sealed-%d" % n))
                    await trio.testing.wait_all_tasks_blocked(0.05)  # all 8 read off the socket
                posted = [await a.push(w.Posted) for _ in range(8)]
                seqs = [p.seq for p in posted if isinstance(p, w.Posted)]
                assert seqs == list(range(seqs[0], seqs[0] + 8))
                # The first post was read before the rest arrived: at most two messages.
                held = one.nats.tails.ops[ROOM]
                assert len({held[seq] for seq in seqs}) <= 2
                got = await b.ops(8)
                assert [(op.seq, op.op_id, op.body) for op in got] == [
                    (seqs[n], f"op-{n}", b"sealed-%d" % n) for n in range(8)]
