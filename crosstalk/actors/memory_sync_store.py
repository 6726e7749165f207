"""The memory-sync actor's store: :class:`StoreAdapter`, its ``SyncStore`` over the daemon's
SQLite store. Every write to room memory goes through the :class:`MemoryFollower`, whose cache
of loaded states must see every change."""

from __future__ import annotations

import sqlite3
import time

from crosstalk import sim_hooks
from crosstalk.actors.memory_sync_api import StoreView
from crosstalk.core.memory_sync import OurMemory
from crosstalk.store import memory as m
from crosstalk.store import room_log
from crosstalk.store.db import Store
from crosstalk.store.memory import MemoryCursor
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import added_by, members
from crosstalk.wire.memory import MemorySnapshot, Outcome


class StoreAdapter:
    """:class:`SyncStore` over the daemon's store; every write goes through the follower."""

    def __init__(self, store: Store, follower: MemoryFollower) -> None:
        self._store = store
        self._follower = follower

    async def rooms(self) -> list[str]:
        return await self._store.read(m.rooms_in)

    async def members(self, room: str) -> list[str]:
        """Joined members only: one still invited gets none of the room's ops, so it never
        hears an ask (sim seed 85: asked for ever while the room had nobody else in it)."""
        roster = await self._store.read(lambda c: members(c, room))
        return [x.fingerprint for x in roster if x.state == "member"]

    async def inviter(self, room: str) -> str | None:
        me = self._follower.me
        return await self._store.read(lambda c: added_by(c, room, me))

    async def cursor(self, room: str) -> MemoryCursor:
        return await self._store.read(lambda c: m.cursor(c, room))

    async def received_through(self, room: str) -> int:
        def read(conn: sqlite3.Connection) -> int:
            # The link's cursor (ops committed, applied or not, and our own posts), or the
            # memory's, when a snapshot took it further.
            return max(m.cursor(conn, room).last_seq, room_log.relay_cursor(conn, room))
        return await self._store.read(read)

    async def view(self) -> StoreView:
        def read(conn: sqlite3.Connection) -> StoreView:
            stalled = tuple(c.room_id for c in m.stalled_rooms(conn))
            return StoreView(tuple(m.rooms_in(conn)), stalled, tuple(m.repairing_rooms(conn)))

        return await self._store.read(read)

    async def ours(self, room: str) -> OurMemory:
        def read(conn: sqlite3.Connection) -> OurMemory:
            cursor = m.cursor(conn, room)
            held = self._follower.held_from(conn, room)
            return OurMemory(cursor.hole_from is not None, held, cursor.conceded)

        return await self._store.read(read)

    async def note_request(self, room: str, request_id: str, asked: str | None) -> None:
        now = time.time()
        await self._store.write(lambda c: m.set_request(c, room, request_id, asked, now))

    async def snapshot(self, room: str) -> tuple[MemorySnapshot, bool] | None:
        def read(conn: sqlite3.Connection) -> tuple[MemorySnapshot, bool] | None:
            cursor = m.cursor(conn, room)
            if cursor.hole_from is not None:
                return None
            return m.load_snapshot(conn, room), cursor.conceded

        return await self._store.read(read)

    async def drop_journal(self, room: str) -> None:
        await self._store.write(lambda c: m.drop_journal(c, room))

    async def advance(self, room: str) -> None:
        """:meth:`MemoryFollower.advance`, in a write transaction only when it has something to
        do: one of our own ops sequenced past the room's memory cursor, and no hole. Every room
        batch nudges this actor, and most batches are plain messages: looking first on a reader
        keeps a write transaction (and its fsync) off the message path."""

        def pending(conn: sqlite3.Connection) -> bool:
            cursor = m.cursor(conn, room)
            return cursor.hole_from is None and (
                m.own_ops_after(conn, room, cursor.last_seq) is not None
            )

        if await self._store.read(pending):
            await self._store.write(lambda c: self._follower.advance(c, room))

    async def held_from(self, room: str) -> int | None:
        return await self._store.read(lambda c: self._follower.held_from(c, room))

    async def concede(self, room: str) -> None:
        sim_hooks.probe("memory.hole_conceded")
        await self._store.write(lambda c: self._follower.concede(c, room))

    async def unreported(self) -> list[tuple[str, str, str]]:
        return await self._store.read(m.unreported_sent)

    async def outcome(self, room: str, op_id: str) -> Outcome | None:
        return await self._store.read(lambda c: m.outcome(c, room, op_id))

    async def mark_reported(self, op_id: str) -> None:
        await self._store.write(lambda c: m.mark_reported(c, op_id))
