"""The room actor holds what may open later (an unknown sender, a future epoch) and never drops
it: the ops behind it wait too, so the log is still applied in order."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import Applier, RoomActor, Wake
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.features.membership.key_share import apply_key_share
from crosstalk.features.membership.keys import seal_key
from crosstalk.features.rooms.appliers import apply_rekey
from crosstalk.store import room_keys
from crosstalk.store.db import RunSync, Store, run_inline
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire.room_ops import KeyShare, MessageOp, Rekey, RoomOp, encode_op, frame_body

ROOM = "h" * 32
KEYS = {0: bytes(range(32)), 1: bytes(range(1, 33))}
ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
CY = crypto.Keys(b"\x05" * 32, b"\x06" * 32)


def _sealed(
    signer: crypto.Keys, op_id: str, epoch: int = 0, *, key: bytes | None = None,
    op: RoomOp | None = None,
) -> bytes:
    """``op`` (by default a message) sealed under ``key`` (by default the epoch's in KEYS)."""
    sealed = crypto.seal_op(
        signer, KEYS[epoch] if key is None else key,
        encode_op(MessageOp(msg_id=op_id, text=op_id) if op is None else op),
        room_id=ROOM, epoch=epoch, op_id=op_id, nonce=op_id.encode().ljust(24, b"\x00")[:24],
    )
    return frame_body(epoch, sealed)


def _member(keys: crypto.Keys, label: str) -> Callable[[sqlite3.Connection], None]:
    return lambda conn: add_member(
        conn, RoomMember(ROOM, keys.fingerprint, label, keys.ed_pub, keys.x_pub)
    )


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """A store with room ``ROOM`` (epoch 0) whose roster is ana and ben."""
    async with room_store() as opened:
        yield opened


@asynccontextmanager
async def room_store(run_sync: RunSync = run_inline) -> AsyncIterator[Store]:
    root = Path(tempfile.mkdtemp(prefix="ct-"))
    opened = await Store.open(root / "state.db", run_sync=run_sync)

    def setup(conn: sqlite3.Connection) -> None:
        add_room(conn, Room(ROOM, "team", "shared", "joined", 0, 0.0), KEYS[0])
        _member(ANA, "ana")(conn)
        _member(BEN, "ben")(conn)

    await opened.write(setup)
    try:
        yield opened
    finally:
        await opened.close()
        shutil.rmtree(root, ignore_errors=True)


def _inbound(*ops: tuple[int, str, crypto.Keys, bytes]) -> Callable[[sqlite3.Connection], None]:
    def load(conn: sqlite3.Connection) -> None:
        for seq, op_id, sender, body in ops:
            conn.execute(
                "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, "
                "received_at) VALUES (?, ?, ?, ?, ?, 0, 0)",
                (ROOM, op_id, seq, sender.fingerprint, body),
            )
    return load


class _Room:
    """A running room actor over ``store`` that records what it applied."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[Applied] = []
        self.changed = trio.Event()

    def record(self, _conn: sqlite3.Connection, applied: Applied) -> None:
        self.seen.append(applied)

    async def listener(self, _applied: list[Applied]) -> None:
        self.changed.set()

    async def wait_for(self, count: int, inbox: trio.MemorySendChannel[Wake]) -> None:
        with trio.fail_after(10):
            while len(self.seen) < count:
                self.changed = trio.Event()
                await inbox.send(Wake())
                await self.changed.wait()


async def _run(
    store: Store,
    test: Callable[[_Room, trio.MemorySendChannel[Wake]], object],
    *,
    key_takers: Sequence[Applier] = (),
    appliers: Sequence[Applier] = (),
) -> None:
    world = _Room(store)
    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[*appliers, world.record], on_applied=world.listener,
            key_takers=key_takers,
        )
        inbox = await supervisor.start_actor("room", actor)
        await test(world, inbox)  # type: ignore[misc]
        nursery.cancel_scope.cancel()


async def test_an_op_from_a_sender_not_yet_in_the_roster_waits_with_everything_after_it(
    store: Store,
) -> None:
    """cy's op (seq 2) and ben's after it wait until cy's keys arrive; then all apply in order.

    The batch that held them is the one that applied seq 1, so seeing only seq 1 after it
    shows the hold (and a second wake still finds nothing to apply: the listener stays quiet
    until cy is known).
    """
    await store.write(_inbound(
        (1, "b1", BEN, _sealed(BEN, "b1")),
        (2, "c1", CY, _sealed(CY, "c1")),
        (3, "b2", BEN, _sealed(BEN, "b2")),
    ))
    seen: list[Applied] = []

    async def test(world: _Room, inbox: trio.MemorySendChannel[Wake]) -> None:
        await world.wait_for(1, inbox)
        assert [a.op_id for a in world.seen] == ["b1"]
        await store.write(_member(CY, "cy"))
        await world.wait_for(3, inbox)
        seen.extend(world.seen)

    await _run(store, test)
    assert [(a.seq, a.op_id) for a in seen] == [(1, "b1"), (2, "c1"), (3, "b2")]
    assert all(isinstance(a.op, MessageOp) for a in seen)  # nothing rejected


async def test_a_future_epoch_waits_for_its_key_and_a_past_one_without_key_is_rejected(
    store: Store,
) -> None:
    """Epoch 1 before its rekey arrived is held (the batch that applied seq 1 stops there);
    once the key is here it opens. An op under an epoch older than every key we hold will
    never open: it is rejected (applied as None), not held."""
    await store.write(_inbound(
        (1, "b1", BEN, _sealed(BEN, "b1", epoch=0)),
        (2, "b2", BEN, _sealed(BEN, "b2", epoch=1)),
    ))
    seen: list[Applied] = []

    async def test(world: _Room, inbox: trio.MemorySendChannel[Wake]) -> None:
        await world.wait_for(1, inbox)
        assert [a.seq for a in world.seen] == [1]

        def rekeyed(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT INTO room_keys (room_id, epoch, key) VALUES (?, 1, ?)", (ROOM, KEYS[1])
            )
            conn.execute("DELETE FROM room_keys WHERE room_id = ? AND epoch = 0", (ROOM,))
            _inbound((3, "b0", BEN, _sealed(BEN, "b0", epoch=0)))(conn)

        await store.write(rekeyed)
        await world.wait_for(3, inbox)
        seen.extend(world.seen)

    await _run(store, test)
    assert [(a.seq, a.op is not None) for a in seen] == [(1, True), (2, True), (3, False)]


def _key_share(signer: crypto.Keys, op_id: str, to: crypto.Keys) -> bytes:
    """A share of the epoch-1 key sealed to ``to``, posted under epoch 0."""
    share = KeyShare(1, {to.fingerprint: seal_key(to.x_pub, KEYS[1], ROOM, 1)})
    sealed = crypto.seal_op(
        signer, KEYS[0], encode_op(share), room_id=ROOM, epoch=0, op_id=op_id,
        nonce=op_id.encode().ljust(24, b"\x00")[:24],
    )
    return frame_body(0, sealed)


@pytest.mark.parametrize("takes_keys_ahead", [True, False])
async def test_a_key_that_comes_after_the_op_it_opens_is_taken_ahead_of_the_log(
    takes_keys_ahead: bool,
) -> None:
    """Ben's epoch-1 op (seq 2) is sequenced before the share that brings us epoch 1 (seq 3):
    in order, seq 2 would wait for seq 3 for ever. The room takes the key from seq 3 ahead of
    the log, then applies 1, 2, 3 in order. Without key takers (the planted bug) it stays held."""
    async with room_store() as store:
        await store.write(_inbound(
            (1, "b1", BEN, _sealed(BEN, "b1", epoch=0)),
            (2, "b2", BEN, _sealed(BEN, "b2", epoch=1)),
            (3, "k1", BEN, _key_share(BEN, "k1", to=ANA)),
        ))
        seen: list[Applied] = []

        async def test(world: _Room, inbox: trio.MemorySendChannel[Wake]) -> None:
            if takes_keys_ahead:
                await world.wait_for(3, inbox)
            else:
                await world.wait_for(1, inbox)
                await inbox.send(Wake())
                await world.wait_for(1, inbox)
            seen.extend(world.seen)

        def take(conn: sqlite3.Connection, applied: Applied) -> None:
            apply_key_share(conn, applied, ANA)

        await _run(store, test, key_takers=[take] if takes_keys_ahead else [])
    if takes_keys_ahead:
        assert [(a.seq, type(a.op).__name__) for a in seen] == [
            (1, "MessageOp"), (2, "MessageOp"), (3, "KeyShare")
        ]
    else:
        assert [a.seq for a in seen] == [1]


BENS_EPOCH_1 = bytes(range(2, 34))  # ben's key for epoch 1; ana minted KEYS[1] for it too


@pytest.mark.parametrize("takes_keys_in_order", [True, False])
async def test_a_second_key_for_an_epoch_we_minted_opens_what_follows_it_in_the_same_batch(
    takes_keys_in_order: bool,
) -> None:
    """Ana and ben removed someone at once: both minted epoch 1. Ben's rekey (seq 1) and his
    first message under his epoch-1 key (seq 2) come in one batch (ana was away). Ana already
    holds a key for epoch 1, so seq 2 is opened at once: it opens only if ben's key, taken from
    seq 1, is kept beside hers before seq 2 is accepted (sim seed 297). The planted bug takes
    keys only when the batch is applied: seq 2 is rejected."""
    rekey = Rekey(1, CY.fingerprint, {ANA.fingerprint: seal_key(ANA.x_pub, BENS_EPOCH_1, ROOM, 1)})
    async with room_store() as store:
        def minted(conn: sqlite3.Connection) -> None:
            room_keys.rotate_key(conn, ROOM, 1, KEYS[1])
            _inbound(
                (1, "r1", BEN, _sealed(BEN, "r1", epoch=0, op=rekey)),
                (2, "b1", BEN, _sealed(BEN, "b1", epoch=1, key=BENS_EPOCH_1)),
            )(conn)

        await store.write(minted)
        seen: list[Applied] = []

        async def test(world: _Room, inbox: trio.MemorySendChannel[Wake]) -> None:
            await world.wait_for(2, inbox)
            seen.extend(world.seen)

        def take(conn: sqlite3.Connection, applied: Applied) -> None:
            apply_rekey(conn, applied, ANA)

        await _run(store, test, appliers=[take], key_takers=[take] if takes_keys_in_order else [])
    opened = [(a.seq, type(a.op).__name__) for a in seen]
    if takes_keys_in_order:
        assert opened == [(1, "Rekey"), (2, "MessageOp")]
    else:
        assert opened == [(1, "Rekey"), (2, "NoneType")]
