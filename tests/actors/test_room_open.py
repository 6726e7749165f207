"""The room actor opens only what its roster signed: tampered, forged, replayed ops are dropped."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

import pytest
import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import RoomActor, Wake
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.store.db import Store
from crosstalk.wire.room_ops import MessageOp, encode_op, frame_body
from tests.actors.room_stores import ANA, BEN, room_of_two

ROOM = "r" * 32
KEY = bytes(range(32))
MALLORY = crypto.Keys(b"\x05" * 32, b"\x06" * 32)


def _sealed(signer: crypto.Keys, op_id: str, text: str, nonce: bytes) -> bytes:
    op = MessageOp(msg_id=op_id, text=text)
    sealed = crypto.seal_op(
        signer, KEY, encode_op(op), room_id=ROOM, epoch=0, op_id=op_id, nonce=nonce
    )
    return frame_body(0, sealed)


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    async with room_of_two(ROOM, KEY) as opened:
        yield opened


def _inbound(conn: sqlite3.Connection, seq: int, op_id: str, sender: str, body: bytes) -> None:
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, 0, 0)",
        (ROOM, op_id, seq, sender, body),
    )


async def test_only_ops_signed_by_their_roster_sender_are_applied(store: Store) -> None:
    """Valid → applied; tampered, wrong signer, lifted to another op id → rejected (None)."""
    good = _sealed(BEN, "op-1", "hello", b"\x00" * 24)
    tampered = bytearray(_sealed(BEN, "op-2", "hello", b"\x01" * 24))
    tampered[-1] ^= 1
    forged = _sealed(MALLORY, "op-3", "I am ben", b"\x02" * 24)  # the relay says it came from ben
    replayed = good  # the same sealed bytes posted again under a new op id

    def load(conn: sqlite3.Connection) -> None:
        _inbound(conn, 1, "op-1", BEN.fingerprint, good)
        _inbound(conn, 2, "op-2", BEN.fingerprint, bytes(tampered))
        _inbound(conn, 3, "op-3", BEN.fingerprint, forged)
        _inbound(conn, 4, "op-4", BEN.fingerprint, replayed)

    await store.write(load)
    seen: list[Applied] = []
    done = trio.Event()

    def record(_conn: sqlite3.Connection, applied: Applied) -> None:
        seen.append(applied)
        if applied.seq == 4:  # appliers run inline, in the room's transaction
            done.set()

    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM,
            store=store,
            keys=ANA,
            relay=RelayClient(link_send, LinkTimings()),
            appliers=[record],
        )
        inbox = await supervisor.start_actor("room", actor)
        await inbox.send(Wake())
        with trio.fail_after(10):
            await done.wait()
        nursery.cancel_scope.cancel()
    assert [a.seq for a in seen] == [1, 2, 3, 4]
    assert isinstance(seen[0].op, MessageOp) and seen[0].op.text == "hello"
    assert [a.op for a in seen[1:]] == [None, None, None]
