"""Which rooms' ops reach a relay node: only those an identity connected to it is in (the rest
of the stream, membership, cursors, devices, slots, reaches every node). A node that starts
following a room reloads it, so a client that comes to it misses nothing, pushed or replayed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from crosstalk.crypto import fingerprint
from crosstalk.wire import relay as w
from tests.relay.client import Identity, open_client, open_ws, pair_and_room
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.test_nats_node_races import two_nodes, wait_until

pytestmark = pytest.mark.e2e

ROOM = "followed"


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "nats")


async def test_a_node_takes_in_a_rooms_ops_only_while_a_member_is_connected_to_it(
    nats_server: NatsServer,
) -> None:
    """alice and bob are both on node 1: node 2 does not take in their ops. bob then comes to
    node 2 and resumes from 0: he gets every op (node 2 reloaded the room at his hello) and
    the next op live; when he goes, node 2 stops following the room."""
    alice, bob, carol = Identity(), Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (_one, port1, two, port2):
            async with open_client(port1, alice) as a, open_client(port1, bob) as b:
                await pair_and_room(a, b, ROOM)
                for n in (1, 2, 3):
                    await a.ok(w.Post(a.next_req(), ROOM, f"op-{n}", b"sealed"))
                # A device stored after the ops reaches node 2 after them (one stream, one
                # order): once it is there, op 3 would be too if node 2 followed the room. (A
                # device is stored once its identity is in a room: carol makes one of her own.)
                async with open_client(port1, carol) as c:
                    await c.ok(w.Create(c.next_req(), "carols", carol.vouch("carols", carol)))
                await wait_until(lambda: two.core.knows_device(fingerprint(carol.ed_pub),
                                                               "dev-1"))
                assert ROOM not in two._followed
                assert 3 not in two.nats.tails.ops.get(ROOM, {})
                async with open_client(port2, bob, resume={ROOM: 0}) as b2:
                    assert ROOM in two._followed
                    ops = [f for f in b2.pushes if isinstance(f, w.Op)]
                    assert [op.op_id for op in ops] == ["op-1", "op-2", "op-3"]
                    b2.pushes.clear()
                    await a.ok(w.Post(a.next_req(), ROOM, "op-4", b"sealed"))
                    live = await b2.push(w.Op)
                    assert isinstance(live, w.Op) and (live.seq, live.op_id) == (4, "op-4")
                await wait_until(lambda: ROOM not in two._followed)


async def test_an_invitation_from_another_node_makes_a_node_follow_the_room(
    nats_server: NatsServer,
) -> None:
    """bob is on node 2 with no room; alice, on node 1, creates one, posts, and adds him. Node
    2 starts following the room when it hears of the invitation (bob is connected there, and
    is told), so after his accept he gets alice's next op live, and a resume from 0 gives him
    every op since he joined."""
    alice, bob = Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (_one, port1, two, port2):
            async with open_client(port1, alice) as a, open_client(port2, bob) as b:
                await a.ok(w.Create(a.next_req(), "other", alice.vouch("other", alice)))
                slot = await a.ok(w.SlotOpen(a.next_req()))
                assert isinstance(slot, w.Slot)
                await b.ok(w.SlotJoin(b.next_req(), slot.slot))
                await a.ok(w.Create(a.next_req(), ROOM, alice.vouch(ROOM, alice)))
                await a.ok(w.Post(a.next_req(), ROOM, "before", b"sealed"))
                assert ROOM not in two._followed
                await a.ok(w.Add(a.next_req(), ROOM, bob.ed_pub, bob.x_pub,
                                 alice.vouch(ROOM, bob)))
                await b.push(w.Invited)
                await wait_until(lambda: ROOM in two._followed)
                assert "other" not in two._followed
                await b.ok(w.Accept(b.next_req(), ROOM))
                await a.ok(w.Post(a.next_req(), ROOM, "after", b"sealed"))
                live = await b.push(w.Op)
                assert isinstance(live, w.Op) and live.op_id == "after"
            async with open_client(port2, bob, resume={ROOM: 0}) as b2:
                ops = [f for f in b2.pushes if isinstance(f, w.Op)]
                assert [op.op_id for op in ops] == ["after"]


async def test_a_forged_hello_makes_a_node_follow_and_reload_nothing(
    nats_server: NatsServer,
) -> None:
    """A hello naming bob's key with a signature that does not verify is refused, and node 2
    neither follows bob's room nor reloads it (a reload reads every op the room holds)."""
    alice, bob, mallory = Identity(), Identity(), Identity()
    with trio.fail_after(60):
        async with two_nodes(nats_server.url) as (_one, port1, two, port2):
            async with open_client(port1, alice) as a, open_client(port1, bob) as b:
                await pair_and_room(a, b, ROOM)
                await wait_until(lambda: ROOM in two.core._rooms.member_of.get(bob.fp, set()))
                reloads = 0
                reload = two._reload

                async def counted(unit: str) -> None:
                    nonlocal reloads
                    reloads += 1
                    await reload(unit)

                two._reload = counted  # type: ignore[method-assign]
                async with open_ws(port2) as ws:
                    challenge = w.decode_relay_frame(await ws.get_message())
                    assert isinstance(challenge, w.Challenge)
                    transcript = w.hello_transcript(challenge.nonce, challenge.relay_key,
                                                    bob.ed_pub, bob.x_pub, "dev-1",
                                                    w.PROTOCOL_VERSION)
                    forged = w.Hello(bob.ed_pub, bob.x_pub, "dev-1", w.PROTOCOL_VERSION,
                                     mallory.key.sign(transcript).signature)
                    await ws.send_message(w.encode_frame(forged))
                    refused = w.decode_relay_frame(await ws.get_message())
                    assert isinstance(refused, w.Error) and refused.code == "unauthenticated"
                assert ROOM not in two._followed and reloads == 0
                async with open_client(port2, bob):
                    assert ROOM in two._followed and reloads == 1
