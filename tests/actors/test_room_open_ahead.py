"""The room's next batch is opened ahead, while the actor commits this one
(crosstalk.actors.room_open.Ahead): its results are taken only for the very jobs it opened, so
a batch whose keys or signers changed in between is opened again under the new ones."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

import attrs
import pytest
import trio

from crosstalk.actors import room_open
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import BATCH, RoomActor, Wake
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.store.db import Store
from tests.actors.room_stores import ANA, BEN, insert_inbound, room_of_two
from tests.actors.test_room_batches import KEY
from tests.actors.test_room_batches import ROOM as BATCH_ROOM
from tests.actors.test_room_batches import _sealed as sealed_message
from tests.actors.test_room_parallel_open import MALLORY, ROOM, _jobs, _shape

COUNT = BATCH + 50  # the second batch is opened ahead (more than PARALLEL_FROM ops)


def test_ahead_gives_what_inline_gives_for_its_own_jobs() -> None:
    """Taken for the jobs it started with, every result is the one inline opening gives."""
    jobs = _jobs(100)
    ahead = room_open.Ahead(ROOM, jobs)
    taken = ahead.take(list(jobs))
    assert taken is not None
    assert [_shape(r) for r in taken] == [_shape(r) for r in room_open.open_inline(ROOM, jobs)]


def test_ahead_gives_nothing_for_other_jobs() -> None:
    """One op to check under another signer (the roster changed): nothing is handed over."""
    jobs = _jobs(100)
    ahead = room_open.Ahead(ROOM, jobs)
    changed = [*jobs[:40], attrs.evolve(jobs[40], signer=MALLORY.ed_pub), *jobs[41:]]
    assert ahead.take(changed) is None


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    """``COUNT`` messages from ben in the room of ``test_room_batches`` (its key and room)."""
    def ops(conn: sqlite3.Connection) -> None:
        insert_inbound(conn, BATCH_ROOM, [
            (n, f"op-{n}", BEN.fingerprint, sealed_message(n)) for n in range(1, COUNT + 1)
        ])

    async with room_of_two(BATCH_ROOM, KEY, ops) as opened:
        yield opened


async def test_a_batch_opened_ahead_is_opened_again_when_the_roster_changed_meanwhile(
    store: Store,
) -> None:
    """Ben's signing key changes between the two batches (after the first one's commit, before
    the second one's transaction): the second batch, opened ahead under his old key, is refused
    under the new one, as it would have been had nothing been opened ahead."""
    accepted: dict[int, bool] = {}
    done = trio.Event()

    def applier(conn: sqlite3.Connection, applied: Applied) -> None:
        accepted[applied.seq] = applied.op is not None

    def rekeyed(conn: sqlite3.Connection) -> None:
        conn.execute(
            "UPDATE room_members SET signing_key = ? WHERE room_id = ? AND fingerprint = ?",
            (MALLORY.ed_pub, BATCH_ROOM, BEN.fingerprint),
        )

    async def heard(applied: list[Applied]) -> None:
        if applied[-1].seq == BATCH:
            await store.write(rekeyed)
        if applied[-1].seq == COUNT:
            done.set()

    link_send, link_receive = trio.open_memory_channel[LinkCommand](1)
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=BATCH_ROOM, store=store, keys=ANA,
            relay=RelayClient(link_send, LinkTimings()), appliers=[applier], on_applied=heard,
        )
        inbox = await supervisor.start_actor("room", actor)
        await inbox.send(Wake())
        with trio.fail_after(30):
            await done.wait()
        nursery.cancel_scope.cancel()
    assert [accepted[n] for n in range(1, COUNT + 1)] == [True] * BATCH + [False] * 50
