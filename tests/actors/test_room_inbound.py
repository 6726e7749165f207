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
        self.reads = 0
        self.on_hand: Callable[[], None] = lambda: None  # runs as a batch is handed on
        self.writes_when_handed: list[int] = []
        self.handed_send, self.handed_receive = trio.open_memory_channel[list[str]](100)

    def applier(self, conn: sqlite3.Connection, entry: Applied) -> None:
        if self.failing:
            raise RuntimeError("an applier bug")
        self.applied_in.append((entry.op_id, _count(conn, "relay_inbound")))

    async def on_applied(self, applied: list[Applied]) -> None:
        self.writes_when_handed.append(self.writes)
        self.on_hand()
        self.handed_send.send_nowait([a.op_id for a in applied])

    async def counting(self, fn: Callable[..., Any], *args: Any, limiter: Any = None) -> Any:
        """The store's runner: counts write transactions (the limiter tells them apart)."""
        if limiter is not None and fn.__name__ == "_run_write":
            self.writes += 1
        if fn.__name__ == "_run_read":
            self.reads += 1
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


async def test_after_the_links_apply_the_room_opens_no_write_of_its_own() -> None:
    """Once the link applied everything it committed, the wakes that follow (the link's, the
    router's for the same ops) read the log and find nothing: no empty write transaction."""
    world = _World(None)  # type: ignore[arg-type]  # the store comes next, with the runner
    async with room_store(world.counting) as store:
        world.store = store
        doorbell = Doorbell()
        link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
        async with link_receive, running(Supervisor(heartbeat=5.0)) as sup:
            room = RoomActor(
                room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
                appliers=[world.applier], on_applied=world.on_applied, doorbell=doorbell,
            )
            await sup.start_actor("room", room)
            await trio.testing.wait_all_tasks_blocked()
            link_store = SqliteLinkStore(store, apply_inbound=inbound_applier({ROOM: room}))
            await link_store.commit_inbound_many([_op(1)], 100.0)
            committed = world.writes
            doorbell.ring()  # the router's wake for the same op
            await trio.testing.wait_all_tasks_blocked()
            assert world.writes == committed
            assert await world.handed_receive.receive() == ["b1"]


async def test_a_ring_during_the_hand_on_is_answered_by_the_look_after_it() -> None:
    """The router's ring for what the link applied, made while the room hands the batch on,
    is covered by the one read that follows: no second wake, no second look."""
    world = _World(None)  # type: ignore[arg-type]  # the store comes next, with the runner
    async with room_store(world.counting) as store:
        world.store = store
        doorbell = Doorbell()
        world.on_hand = doorbell.ring
        link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
        async with link_receive, running(Supervisor(heartbeat=5.0)) as sup:
            room = RoomActor(
                room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
                appliers=[world.applier], on_applied=world.on_applied, doorbell=doorbell,
            )
            await sup.start_actor("room", room)
            await trio.testing.wait_all_tasks_blocked()
            link_store = SqliteLinkStore(store, apply_inbound=inbound_applier({ROOM: room}))
            reads, writes = world.reads, world.writes
            await link_store.commit_inbound_many([_op(1)], 100.0)
            await trio.testing.wait_all_tasks_blocked()
            assert (world.reads - reads, world.writes - writes) == (1, 1)  # the link's write
            assert not doorbell.pending()


class _TrustsItsHint(RoomActor):
    """The planted bug: after the link's apply it takes its hint for the store and never
    looks, so a ring for anything committed elsewhere is lost."""

    async def _catch_up(self, ctx: Any) -> None:
        if self._settled:
            handed, self._handed = self._handed, []
            if handed and self._on_applied is not None:
                await self._on_applied(handed)
            return
        await super()._catch_up(ctx)


async def _ring_from_elsewhere(actor: type[RoomActor]) -> list[str]:
    """The link applies b1; then b2 is committed outside the link's apply and its committer
    rings, before the room's catch-up has run. Returns what the room applied."""
    async with room_store() as store:
        world = _World(store)
        doorbell = Doorbell()
        link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
        async with link_receive, running(Supervisor(heartbeat=5.0)) as sup:
            room = actor(
                room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
                appliers=[world.applier], on_applied=world.on_applied, doorbell=doorbell,
            )
            await sup.start_actor("room", room)
            await trio.testing.wait_all_tasks_blocked()
            link_store = SqliteLinkStore(store, apply_inbound=inbound_applier({ROOM: room}))
            await link_store.commit_inbound_many([_op(1)], 100.0)
            await store.write(lambda conn: _insert(conn, _op(2)))  # no room_apply for it
            doorbell.ring()
            await trio.testing.wait_all_tasks_blocked()
        return [op for op, _ in world.applied_in]


def _insert(conn: sqlite3.Connection, op: Op) -> None:
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 0)",
        (op.room, op.op_id, op.seq, op.sender, op.body, op.ts),
    )


async def test_a_ring_from_elsewhere_after_the_links_apply_is_looked_at() -> None:
    """An op committed outside the link's apply, rung for between that apply and the room's
    catch-up, is applied: the room's read of the log finds it and it writes."""
    assert await _ring_from_elsewhere(RoomActor) == ["b1", "b2"]


async def test_a_room_that_trusts_its_hint_loses_that_ring() -> None:
    """The planted bug: skipping the look after the link's apply leaves b2 unapplied, which
    the test above would catch."""
    assert await _ring_from_elsewhere(_TrustsItsHint) == ["b1"]
