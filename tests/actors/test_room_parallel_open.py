"""A large batch is opened on two threads (crosstalk.actors.room_open), and nothing else changes:
every op is checked, a bad one is refused as inline, results keep the log's order, and a batch
whose apply fails is rolled back whole and applied again later."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from typing import cast

import pytest
import trio

from crosstalk import crypto
from crosstalk.actors import room_open
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import RoomActor
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.errors import LocalProtocolError
from crosstalk.store import room_log
from crosstalk.store.db import Store
from crosstalk.wire.room_ops import MessageOp, encode_op, frame_body
from tests.actors.room_stores import ANA, BEN, insert_inbound, room_of_two

ROOM = "p" * 32
KEY = bytes(range(32))
MALLORY = crypto.Keys(b"\x05" * 32, b"\x06" * 32)
COUNT = 64  # one batch, opened on two threads
FORGED = 36  # signed by Mallory, though the relay says Ben sent it


def _seal(signer: crypto.Keys, plain: bytes, op_id: str, nonce: bytes) -> bytes:
    """Sealed as from ben; signed by ``signer`` (someone who holds the room key, if not ben),
    so the seal opens and only the signature check can refuse it."""
    ad = crypto.op_associated_data(room_id=ROOM, epoch=0, sender=BEN.fingerprint, op_id=op_id)
    signature = crypto.sign(signer, crypto.op_signed_bytes(ad, plain))
    return crypto.aead_seal(KEY, signature + plain, nonce=nonce, ad=ad)


def _sealed(signer: crypto.Keys, seq: int) -> bytes:
    op_id = f"op-{seq}"
    plain = encode_op(MessageOp(msg_id=op_id, text=f"message {seq}"))
    return frame_body(0, _seal(signer, plain, op_id, seq.to_bytes(24, "big")))


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """Room ``ROOM`` with ana and ben, and ``COUNT`` ops from ben, one of them forged."""
    def ops(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE applied_here (seq INTEGER PRIMARY KEY)")
        insert_inbound(conn, ROOM, [
            (n, f"op-{n}", BEN.fingerprint, _sealed(MALLORY if n == FORGED else BEN, n))
            for n in range(1, COUNT + 1)
        ])

    async with room_of_two(ROOM, KEY, ops) as opened:
        yield opened


def _actor(store: Store, **kwargs: object) -> RoomActor:
    link_send, _ = trio.open_memory_channel[LinkCommand](1)
    return RoomActor(room_id=ROOM, store=store, keys=ANA,
                     relay=RelayClient(link_send, LinkTimings()), **kwargs)  # type: ignore[arg-type]


async def test_a_forged_op_in_a_large_batch_is_refused_and_the_ops_around_it_apply(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Opened on two threads, the batch applies in seq order; the forged op reaches the
    appliers as rejected (op None) with one warning, exactly as an op refused inline."""
    assert COUNT >= room_open.PARALLEL_FROM  # this batch takes the two-thread path
    seen: list[Applied] = []
    actor = _actor(store, appliers=[lambda _conn, applied: seen.append(applied)])
    with caplog.at_level(logging.WARNING, logger="crosstalk.actors.room"):
        await store.write(actor.open_and_apply)
    assert [a.seq for a in seen] == list(range(1, COUNT + 1))
    for applied in seen:
        if applied.seq == FORGED:
            assert applied.op is None
        else:
            assert isinstance(applied.op, MessageOp)
            assert applied.op.text == f"message {applied.seq}"
    rejected = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert rejected == [
        f"room {ROOM}: rejected op op-{FORGED} (seq {FORGED}) from {BEN.fingerprint}: "
        "a signature did not match its claimed sender; it was dropped"
    ]
    assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == COUNT


async def test_a_batch_whose_apply_fails_midway_is_rolled_back_and_applied_again(
    store: Store, autojump_clock: trio.testing.MockClock
) -> None:
    """An applier raises at op 40 of a large batch: nothing of the batch is committed or
    heard; the supervisor restarts the room, which applies and hands on every op once."""
    failed: list[int] = []
    heard: list[int] = []
    done = trio.Event()

    def apply(conn: sqlite3.Connection, applied: Applied) -> None:
        if applied.seq == 40 and not failed:
            failed.append(applied.seq)
            raise RuntimeError("planted applier failure")
        conn.execute("INSERT INTO applied_here (seq) VALUES (?)", (applied.seq,))

    async def listen(applied: list[Applied]) -> None:
        heard.extend(a.seq for a in applied)
        if heard[-1] == COUNT:
            done.set()

    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        await supervisor.start_actor("room", _actor(store, appliers=[apply], on_applied=listen))
        with trio.fail_after(60):
            await done.wait()
        nursery.cancel_scope.cancel()
    assert failed == [40]
    assert heard == list(range(1, COUNT + 1))

    def rows(conn: sqlite3.Connection) -> list[int]:
        return [r[0] for r in conn.execute("SELECT seq FROM applied_here ORDER BY seq")]

    assert await store.read(rows) == list(range(1, COUNT + 1))  # each once: no half batch kept


def _jobs(count: int) -> list[room_open.ToOpen]:
    jobs = []
    for n in range(count):
        signer = MALLORY if n % 17 == 5 else BEN
        sealed = _seal(signer, f"plaintext {n}".encode(), f"op-{n}", n.to_bytes(24, "big"))
        if n % 23 == 7:
            sealed = sealed[:-1] + bytes([sealed[-1] ^ 1])  # tampered: the AEAD refuses it
        jobs.append(room_open.ToOpen(KEY, sealed, BEN.ed_pub, 0, f"op-{n}"))
    return jobs


def _shape(result: room_open.Opened) -> object:
    return result if isinstance(result, bytes) else (type(result), result.message)


def test_two_threads_give_what_one_gives_in_the_same_order() -> None:
    """Plaintexts, refused signatures and refused seals come back per op, in order, as inline."""
    jobs = _jobs(100)
    inline = room_open.open_inline(ROOM, jobs)
    shared = room_open.open_all(ROOM, jobs)
    assert [_shape(r) for r in shared] == [_shape(r) for r in inline]
    assert sum(isinstance(r, crypto.BadSignature) for r in shared) == 6
    assert sum(type(r) is crypto.OpenFailed for r in shared) == 5


def test_an_unexpected_error_is_raised_for_the_earliest_op_that_raised() -> None:
    """A bug met while opening is not swallowed: the error of the earliest such op is raised."""
    jobs = _jobs(100)
    broken = cast(bytes, None)
    jobs[50] = room_open.ToOpen(KEY, broken, BEN.ed_pub, 0, "op-50")  # TypeError in the AEAD
    jobs[90] = room_open.ToOpen(KEY, jobs[90].sealed, BEN.ed_pub, -1, "op-90")
    with pytest.raises(TypeError):
        room_open.open_all(ROOM, jobs)
    jobs[50] = _jobs(51)[50]
    with pytest.raises(LocalProtocolError):
        room_open.open_all(ROOM, jobs)
