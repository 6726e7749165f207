"""The room actor applies in batches: apply scopes wrap each batch, inside its transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import pytest
import trio

from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import BATCH, RoomActor, Wake
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.store.db import Store
from crosstalk.wire.room_ops import MessageOp, encode_op
from tests.actors.room_stores import ANA, bens_ops, room_of_two

ROOM = "r" * 32
KEY = bytes(range(32))
COUNT = BATCH + 50


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    plains = ((n, encode_op(MessageOp(msg_id=f"op-{n}", text=f"message {n}")))
              for n in range(1, COUNT + 1))
    ops = bens_ops(ROOM, KEY, plains)
    async with room_of_two(ROOM, KEY, ops) as opened:
        yield opened


async def test_each_batch_is_wrapped_by_the_apply_scopes_inside_its_transaction(
    store: Store,
) -> None:
    """Scopes are entered before a batch's first applier and left after its last, while the
    transaction is open (what they write commits with the batch); listeners hear each batch."""
    trail: list[str] = []
    done = trio.Event()

    @contextmanager
    def scope(conn: sqlite3.Connection) -> Iterator[None]:
        assert conn.in_transaction
        trail.append("enter")
        yield
        assert conn.in_transaction
        conn.execute("INSERT INTO settings (key, value) VALUES (?, '1')", (f"batch{len(trail)}",))
        trail.append("leave")

    def applier(conn: sqlite3.Connection, applied: Applied) -> None:
        trail.append("apply")

    async def heard(applied: list[Applied]) -> None:
        trail.append(f"heard {len(applied)}")
        if applied[-1].seq == COUNT:
            done.set()

    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[applier], on_applied=heard, scopes=[scope],
        )
        inbox = await supervisor.start_actor("room", actor)
        await inbox.send(Wake())
        with trio.fail_after(30):
            await done.wait()
        nursery.cancel_scope.cancel()
    rest = COUNT - BATCH
    assert trail == [
        "enter", *["apply"] * BATCH, "leave", f"heard {BATCH}",
        "enter", *["apply"] * rest, "leave", f"heard {rest}",
    ]

    def written(conn: sqlite3.Connection) -> tuple[int, int]:
        scopes = conn.execute("SELECT count(*) FROM settings WHERE key LIKE 'batch%'").fetchone()
        cursor = conn.execute("SELECT seq FROM room_cursors WHERE room_id = ?", (ROOM,)).fetchone()
        return int(scopes[0]), int(cursor[0])

    assert await store.read(written) == (2, COUNT)


async def test_a_batch_commits_without_fsync_and_the_store_is_durable_again_after(
    store: Store,
) -> None:
    """The room's apply transaction runs under synchronous=NORMAL (the ops it applies are
    fsynced in relay_inbound already: see the module note); the store's next write is FULL."""
    levels: list[int] = []
    done = trio.Event()

    def applier(conn: sqlite3.Connection, applied: Applied) -> None:
        levels.append(conn.execute("PRAGMA synchronous").fetchone()[0])

    async def heard(applied: list[Applied]) -> None:
        if applied[-1].seq == COUNT:
            done.set()

    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[applier], on_applied=heard,
        )
        inbox = await supervisor.start_actor("room", actor)
        await inbox.send(Wake())
        with trio.fail_after(30):
            await done.wait()
        nursery.cancel_scope.cancel()
    after = await store.write(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0])
    assert (set(levels), len(levels), after) == ({1}, COUNT, 2)
