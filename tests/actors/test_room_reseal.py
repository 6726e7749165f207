"""A queued post sealed under an outdated epoch is sealed anew under the newest key we hold
(crosstalk.actors.room_reseal), with a real store: what it writes and what it leaves alone."""

from __future__ import annotations

import sqlite3

import pytest

from crosstalk import crypto
from crosstalk.actors.room_reseal import carries_keys, resealer
from crosstalk.core.link import OutboxItem, Resealed
from crosstalk.store import link, room_keys
from crosstalk.wire.room_ops import (
    KeyShare,
    MemberNamed,
    MessageOp,
    Rekey,
    RoomOp,
    decode_op,
    encode_op,
    frame_body,
    unframe_body,
)
from tests.actors.room_stores import ANA, BEN, room_of_two

ROOM = "r" * 32
KEY0, KEY1 = b"\x10" * 32, b"\x11" * 32



def queued(conn: sqlite3.Connection, op: RoomOp, epoch: int, key: bytes) -> OutboxItem:
    """``op`` sealed by ana under ``epoch`` and queued in the outbox, as the room actor does."""
    op_id = f"op-{epoch}-{type(op).__name__}"
    sealed = crypto.seal_op(ANA, key, encode_op(op), room_id=ROOM, epoch=epoch, op_id=op_id,
                            nonce=b"\x00" * 24)
    item = link.queue_post(conn, ROOM, op_id, frame_body(epoch, sealed), 0.0)
    assert item is not None
    return item


def stored_body(conn: sqlite3.Connection, item: OutboxItem) -> bytes:
    return bytes(conn.execute("SELECT frame FROM outbox WHERE id = ?", (item.id,)).fetchone()[0])


async def test_a_message_is_sealed_anew_under_the_newest_epoch_in_its_outbox_row() -> None:
    """Same op id and plaintext, signed by us, under epoch 1's key; the row holds the new body."""
    message = MessageOp("m1", "hello")
    async with room_of_two(ROOM, KEY0) as store:
        item = await store.write(lambda conn: queued(conn, message, 0, KEY0))
        await store.write(lambda conn: room_keys.take_key(conn, ROOM, 1, KEY1))
        answer = await resealer(store, ANA)(item)
        assert answer.item is not None and not answer.as_is
        assert answer.item.id == item.id and answer.item.op_id == item.op_id
        epoch, sealed = unframe_body(answer.item.body)
        assert epoch == 1
        plain = crypto.open_op(KEY1, sealed, sender_ed_pub=ANA.ed_pub, room_id=ROOM, epoch=1,
                               op_id=item.op_id)
        assert decode_op(plain) == message
        assert await store.read(lambda conn: stored_body(conn, item)) == answer.item.body


async def test_without_a_newer_key_the_answer_is_not_yet_and_nothing_changes() -> None:
    async with room_of_two(ROOM, KEY0) as store:
        item = await store.write(lambda conn: queued(conn, MessageOp("m1", "hi"), 0, KEY0))
        assert await resealer(store, ANA)(item) == Resealed()
        assert await store.read(lambda conn: stored_body(conn, item)) == item.body


@pytest.mark.parametrize(
    "op",
    [
        KeyShare(1, {BEN.fingerprint: b"sealed key"}),
        MemberNamed({ANA.fingerprint: "ana"}),
    ],
    ids=["key share", "a joiner naming itself"],
)
async def test_ops_that_carry_keys_go_as_they_are(op: RoomOp) -> None:
    """What tells members which key we hold, or gives a joiner its key, keeps its epoch."""
    async with room_of_two(ROOM, KEY0) as store:
        item = await store.write(lambda conn: queued(conn, op, 0, KEY0))
        await store.write(lambda conn: room_keys.take_key(conn, ROOM, 1, KEY1))
        assert await resealer(store, ANA)(item) == Resealed(as_is=True)
        assert await store.read(lambda conn: stored_body(conn, item)) == item.body


async def test_naming_someone_else_is_sealed_anew() -> None:
    """Only a joiner's naming of itself is pinned; a welcome naming others moves on."""
    async with room_of_two(ROOM, KEY0) as store:
        item = await store.write(
            lambda conn: queued(conn, MemberNamed({BEN.fingerprint: "ben"}), 0, KEY0)
        )
        await store.write(lambda conn: room_keys.take_key(conn, ROOM, 1, KEY1))
        answer = await resealer(store, ANA)(item)
        assert answer.item is not None and unframe_body(answer.item.body)[0] == 1


async def test_a_row_sent_meanwhile_is_left_alone() -> None:
    async with room_of_two(ROOM, KEY0) as store:
        item = await store.write(lambda conn: queued(conn, MessageOp("m1", "hi"), 0, KEY0))
        await store.write(lambda conn: room_keys.take_key(conn, ROOM, 1, KEY1))
        await store.write(lambda conn: link.mark_sent(conn, item, 3))
        assert await resealer(store, ANA)(item) == Resealed()
        assert await store.read(lambda conn: stored_body(conn, item)) == item.body


@pytest.mark.parametrize(
    ("op", "carries"),
    [
        (KeyShare(1, {BEN.fingerprint: b"k"}), True),
        (Rekey(1, BEN.fingerprint, {ANA.fingerprint: b"k"}), True),
        (MemberNamed({ANA.fingerprint: "ana"}), True),
        (MemberNamed({BEN.fingerprint: "ben"}), False),
        (MemberNamed({ANA.fingerprint: "ana", BEN.fingerprint: "ben"}), False),
        (MessageOp("m1", "hi"), False),
    ],
)
def test_what_carries_keys(op: RoomOp, carries: bool) -> None:
    assert carries_keys(op, ANA.fingerprint) is carries


async def test_a_pinned_row_is_pinned_again_after_a_restart() -> None:
    """The outbox row keeps ``pinned``, so a link started after a crash lets it pass too."""
    async with room_of_two(ROOM, KEY0) as store:
        await store.write(lambda conn: link.queue_post(conn, ROOM, "k", b"key op", 0.0,
                                                       pinned=True))
        await store.write(lambda conn: link.queue_post(conn, ROOM, "m", b"message", 0.0))
        snapshot = await store.read(lambda conn: link.load(conn, "ws://relay.test"))
        assert [(i.op_id, i.pinned) for i in snapshot.outbox] == [("k", True), ("m", False)]
