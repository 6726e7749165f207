"""The room actor indexes memory records for search once a catch-up has applied everything
(crosstalk/store/schema_search_queue.py): not in the batches' transactions, not left undone."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import BATCH, RoomActor
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.memory import MemoryState
from crosstalk.core.room import Applied
from crosstalk.core.search_query import to_fts
from crosstalk.store.db import Store
from crosstalk.store.memory import replace_all
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.search import Filters, search
from crosstalk.wire.memory import FactAdd, FactRecord, MemorySnapshot, Person
from crosstalk.wire.room_ops import MemoryEnvelope, encode_op
from tests.actors.room_stores import ANA, BEN, bens_ops, room_of_two

ROOM = "r" * 32
KEY = bytes(range(32))
COUNT = BATCH + 20


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    plains = ((n, encode_op(MemoryEnvelope(FactAdd(f"f{n}", f"gizmo fact {n}", ()), at=float(n))))
              for n in range(1, COUNT + 1))
    ops = bens_ops(ROOM, KEY, plains)
    async with room_of_two(ROOM, KEY, ops) as opened:
        yield opened


def _state(conn: sqlite3.Connection) -> tuple[int, int]:
    """(records queued for search, facts the index finds)."""
    queued = conn.execute("SELECT count(*) FROM search_queue").fetchone()[0]
    hits = search(conn, to_fts("gizmo"), Filters(limit=100), me=ANA.fingerprint)
    found = conn.execute("SELECT count(*) FROM search_docs WHERE kind = 'fact'").fetchone()[0]
    assert len(hits) == min(found, 100)
    return int(queued), int(found)


async def test_the_catch_up_leaves_records_to_index_and_the_actor_indexes_them_after(
    store: Store,
) -> None:
    """Each batch commits its records with a queue row each and no search row; once the
    catch-up is done, the actor indexes them all."""
    follower = MemoryFollower(ANA.fingerprint)
    seen: list[tuple[int, int]] = []
    done = trio.Event()

    async def heard(applied: list[Applied]) -> None:
        seen.append(await store.read(_state))
        if applied[-1].seq == COUNT:
            done.set()

    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[follower.applied], scopes=[follower.batch], on_applied=heard,
        )
        await supervisor.start_actor("room", actor)  # it catches up as it starts
        with trio.fail_after(30):
            await done.wait()
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [(BATCH, 0), (COUNT, 0)]
        assert await store.read(_state) == (0, COUNT)
        nursery.cancel_scope.cancel()


async def test_records_left_unindexed_by_a_crash_are_indexed_when_the_actor_starts() -> None:
    """Records noted but not indexed when the daemon stopped (nothing left to apply) are
    indexed by the room actor's first catch-up, not only by the next search."""
    def noted(conn: sqlite3.Connection) -> None:
        snapshot = MemorySnapshot(ROOM, 0, (FactRecord(
            "f1", "gizmo fact", (), Person(BEN.fingerprint, "ben"), 1.0, 1,
            Person(BEN.fingerprint, "ben"), last_affirmed=1.0),), (), (), ())
        replace_all(conn, MemoryState.from_snapshot(snapshot))

    async with room_of_two(ROOM, KEY, noted) as store:
        assert await store.read(_state) == (1, 0)
        link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
        async with link_receive, trio.open_nursery() as nursery:
            supervisor = Supervisor(heartbeat=5.0)
            await nursery.start(supervisor.run)
            actor = RoomActor(room_id=ROOM, store=store, keys=ANA,
                              relay=RelayClient(link_send, LinkTimings()))
            await supervisor.start_actor("room", actor)
            await trio.testing.wait_all_tasks_blocked()
            assert await store.read(_state) == (0, 1)
            nursery.cancel_scope.cancel()
