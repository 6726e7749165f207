"""A running room applies inbound ops in the relay link's own commit, and hands them on once,
in seq order; a room whose applier fails leaves the link's commit alone."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import trio
import trio.testing

from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.relay_link_store import SqliteLinkStore
from crosstalk.actors.room import RoomActor
from crosstalk.actors.room_inbound import inbound_applier
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.store import room_log
from crosstalk.store.db import Store, run_inline
from crosstalk.wire.relay_log import Op
from tests.actors.fakes import running
from tests.actors.test_room_hold import ANA, BEN, ROOM, _sealed, room_store


def _op(seq: int) -> Op:
    op_id = f"b{seq}"
    return Op(room=ROOM, seq=seq, sender=BEN.fingerprint, op_id=op_id,
              body=_sealed(BEN, op_id), ts=float(seq))


def _count(store_conn: sqlite3.Connection, table: str) -> int:
    return int(store_conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


class _World:
    """A room actor over a real store; the appliers record which transaction they ran in."""

    def __init__(self, store: Store, *, failing: bool = False) -> None:
        self.store = store
        self.failing = failing
        self.applied_in: list[tuple[str, int]] = []  # (op id, inbound rows seen in that txn)
        self.handed: list[list[str]] = []
        self.writes = 0  # write transactions so far (see _counting)
        self.writes_when_handed: list[int] = []
        self.handed_send, self.handed_receive = trio.open_memory_channel[list[str]](100)

    def applier(self, conn: sqlite3.Connection, entry: Applied) -> None:
        if self.failing:
            raise RuntimeError("an applier bug")
        self.applied_in.append((entry.op_id, _count(conn, "relay_inbound")))

    async def on_applied(self, applied: list[Applied]) -> None:
        self.writes_when_handed.append(self.writes)
        self.handed_send.send_nowait([a.op_id for a in applied])

    async def counting(self, fn: Callable[..., Any], *args: Any, limiter: Any = None) -> Any:
        """The store's runner: counts write transactions (the limiter tells them apart)."""
        if limiter is not None and fn.__name__ == "_run_write":
            self.writes += 1
        return await run_inline(fn, *args, limiter=limiter)


async def _with_room(world: _World, test: object) -> None:
    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, running(Supervisor(heartbeat=5.0)) as sup:
        room = RoomActor(
            room_id=ROOM, store=world.store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[world.applier], on_applied=world.on_applied, doorbell=Doorbell(),
        )
        await sup.start_actor("room", room)
        await trio.testing.wait_all_tasks_blocked()
        link_store = SqliteLinkStore(world.store, apply_inbound=inbound_applier({ROOM: room}))
        assert callable(test)
        await test(link_store)


async def test_inbound_ops_are_applied_in_the_commit_that_takes_them_in() -> None:
    """The applier runs inside the link's transaction (the op's row is already there); the
    batch reaches the room's listeners once, and later batches follow in seq order."""
    async with room_store() as store:
        world = _World(store)

        async def test(link_store: SqliteLinkStore) -> None:
            with trio.fail_after(10):
                await link_store.commit_inbound_many([_op(1), _op(2)], 100.0)
                assert world.applied_in == [("b1", 2), ("b2", 2)]  # applied before returning
                assert await world.handed_receive.receive() == ["b1", "b2"]
                await link_store.commit_inbound_many([_op(3)], 101.0)
                assert await world.handed_receive.receive() == ["b3"]
            await trio.testing.wait_all_tasks_blocked()
            assert world.handed_receive.statistics().current_buffer_used == 0  # each once

        await _with_room(world, test)
        assert [op for op, _ in world.applied_in] == ["b1", "b2", "b3"]  # each applied once
        assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 3


async def test_a_failing_room_leaves_the_links_commit_whole() -> None:
    """An applier that raises is rolled back alone: the ops and the cursor are committed, the
    room's applied cursor has not moved, and nothing is handed on for it."""
    async with room_store() as store:
        world = _World(store, failing=True)

        async def test(link_store: SqliteLinkStore) -> None:
            await link_store.commit_inbound_many([_op(1)], 100.0)
            cursor = await store.read(
                lambda conn: conn.execute(
                    "SELECT seq FROM relay_cursors WHERE room_id = ?", (ROOM,)
                ).fetchone()
            )
            assert cursor == (1,)
            assert await store.read(lambda conn: _count(conn, "relay_inbound")) == 1
            assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 0
            assert world.handed_receive.statistics().current_buffer_used == 0

        await _with_room(world, test)


async def test_what_the_link_applied_reaches_the_listeners_before_the_rooms_next_transaction(
) -> None:
    """The batch applied in the link's commit is handed on at once when the room wakes, not
    after a transaction of the room's own (a write, with its commit, on the way to the gate)."""
    world = _World(None)  # type: ignore[arg-type]  # the store comes next, with the runner
    async with room_store(world.counting) as store:
        world.store = store

        async def test(link_store: SqliteLinkStore) -> None:
            with trio.fail_after(10):
                await link_store.commit_inbound_many([_op(1)], 100.0)
                committed = world.writes
                assert await world.handed_receive.receive() == ["b1"]
            assert world.writes_when_handed == [committed]

        await _with_room(world, test)


async def test_a_stopped_room_is_left_to_its_own_catch_up() -> None:
    """While a room's actor is not running (stopped, failed, between restarts) the link only
    takes its ops in: nobody would hand the batch on. Started again, the room applies them
    itself and hands them on."""
    async with room_store() as store:
        world = _World(store)
        link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
        doorbell = Doorbell()
        async with link_receive, running(Supervisor(heartbeat=5.0)) as sup:
            room = RoomActor(
                room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
                appliers=[world.applier], on_applied=world.on_applied, doorbell=doorbell,
            )
            await sup.start_actor("room", room)
            await sup.stop_actor("room")
            link_store = SqliteLinkStore(store, apply_inbound=inbound_applier({ROOM: room}))
            await link_store.commit_inbound_many([_op(1)], 100.0)
            assert world.applied_in == []
            assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 0
            doorbell.ring()  # the router's wake
            await sup.start_actor("room", room)
            with trio.fail_after(10):
                assert await world.handed_receive.receive() == ["b1"]
        assert [op for op, _ in world.applied_in] == ["b1"]
