"""The memory feature inside one daemon (:class:`MemoryFeature`): the applier and its batch
scope, the listener, the memory-sync actor, and the writes the ops make.

A write builds a memory op, has the room actor seal it and commit it to the outbox, keeping its
plaintext in that same commit (``memory_sent``: the relay never echoes our own op, so we apply it
ourselves at the seq it gets), then waits a bounded time for the relay to sequence it and for the
op to be applied here. The reply carries the replicated outcome (for a claim: ``won`` or ``lost``
with the holder, the same on every replica), or ``pending`` when the relay did not sequence it in
time; the memory-sync actor then watches it and reports the outcome when it is decided. An
outcome decided while the room's memory gave ops up (and is not repaired yet) is reported as
``pending`` too, with what it decided for now (``core.memory.final_on`` says which): a repair
may decide it otherwise.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import secrets
import sqlite3
import time
from contextlib import AbstractContextManager
from typing import Protocol

import attrs
import trio

from crosstalk.actors.children import DynamicKind
from crosstalk.actors.memory_sync import MemorySync, probe
from crosstalk.actors.memory_sync_api import (
    Answer,
    MemorySyncInput,
    Nudge,
    Resumed,
    SnapshotSeen,
    WatchOwn,
)
from crosstalk.actors.memory_sync_store import StoreAdapter
from crosstalk.actors.router import PresenceQuery, WatchSent
from crosstalk.core.memory import final_on
from crosstalk.core.room import Applied
from crosstalk.errors import NotSetUp
from crosstalk.features.caps import Homed, Identified, Linked, Routed, SendsOps, Stored, Supervises
from crosstalk.features.memory import views as v
from crosstalk.project import bound_room, repo_root
from crosstalk.store import memory as m
from crosstalk.store.link import post_state
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Room
from crosstalk.wire.control.params import Where
from crosstalk.wire.memory import (
    MemoryOp,
    Outcome,
)
from crosstalk.wire.relay_log import ResumedRoom
from crosstalk.wire.room_ops import MemoryEnvelope, Rekey, RoomOp, SyncChunk, SyncRequest

log = logging.getLogger(__name__)
SYNC = DynamicKind("memory_sync", "features/memory, once there is an identity")


class Host(Stored, Identified, SendsOps, Routed, Linked, Supervises, Homed, Protocol):
    """What memory uses: the store, who we are, rooms to write into, the router to watch a
    write's outcome, the link's state, its sync actor, and the heartbeat that bounds waits."""

# Connected: a write waits this many heartbeats for its replicated outcome. A live link proves
# itself within one (it pings at a quarter heartbeat), so past two it is as good as down.
OUTCOME_HEARTBEATS = 2.0
OFFLINE_WAIT = 1.0  # not connected: answer `pending` quickly


@attrs.frozen
class Written:
    """What one write came to: its op id and its outcome here (None: not decided here in time).
    ``final`` is False for an outcome decided on a memory that gave ops up, not repaired yet."""

    op_id: str
    outcome: Outcome | None
    final: bool = True


def bound_to(cwd: str | None) -> str | None:
    """The room the repository at ``cwd`` is bound to, if any (blocking: run in a thread)."""
    root = repo_root(cwd) if cwd else None
    return bound_room(root) if root is not None else None


class MemoryFeature:
    """The memory feature's handles inside one daemon."""

    def __init__(self, daemon: Host) -> None:
        self.daemon = daemon
        self._follower: MemoryFollower | None = None
        self._sync: trio.MemorySendChannel[MemorySyncInput] | None = None
        self._changed = trio.Event()

    # --- seams -----------------------------------------------------------------------------------

    def follower(self) -> MemoryFollower:
        if self._follower is None:
            self._follower = MemoryFollower(self.daemon.keys.fingerprint)
        return self._follower

    def apply(self, conn: sqlite3.Connection, applied: Applied) -> None:
        """Applier: every op of every room's log, in the room's transaction."""
        self.follower().applied(conn, applied)

    def batch(self, conn: sqlite3.Connection) -> AbstractContextManager[None]:
        """Apply scope: memory writes of one room batch are made once, at its end."""
        return self.follower().batch(conn)

    async def on_applied(self, applied: list[Applied]) -> None:
        changed, self._changed = self._changed, trio.Event()
        changed.set()
        sync = await self.sync_inbox()
        if sync is None:
            return
        # Never block here: this runs in the room actor, and the memory-sync actor may itself be
        # waiting on that room actor to queue snapshot pieces. A dropped answer costs the asker
        # one retry (it asks again after RETRY_AFTER); a dropped nudge is covered by the next.
        me = self.daemon.keys.fingerprint
        wanted: list[MemorySyncInput] = [
            Answer(
                entry.room_id, entry.op.request_id, entry.sender, entry.op.held_from,
                repair=entry.op.repair,
            )
            for entry in applied
            if isinstance(entry.op, SyncRequest) and entry.op.ask == me and entry.sender != me
        ]
        wanted += [
            SnapshotSeen(entry.room_id, entry.sender)
            for entry in applied
            if isinstance(entry.op, SyncChunk) and entry.op.index == entry.op.count - 1
            and entry.sender != me
        ]
        wanted.append(Nudge(tuple(sorted({e.room_id for e in applied}))))
        for item in wanted:
            try:
                sync.send_nowait(item)
            except trio.WouldBlock:
                log.info("memory sync is busy; dropped %s", type(item).__name__)

    async def on_sent(self, room_id: str, op_id: str, op: RoomOp) -> None:
        """Sent listener: our own rekey is applied to memory at its seq (the member it removed
        loses their reservations there) as soon as the relay sequences it, like a pending
        memory op of ours; the relay never echoes it, and the room may stay quiet after it."""
        if not isinstance(op, Rekey):
            return
        sync = await self.sync_inbox()
        if sync is None:
            return
        try:
            sync.send_nowait(WatchOwn(room_id, op_id))
        except trio.WouldBlock:  # the next op of the room, or a read, applies it then
            log.info("memory sync is busy; dropped the watch of our rekey in %s", room_id)

    async def on_link_up(self, rooms: list[ResumedRoom]) -> None:
        """Link-up listener: where each room stands at the relay, for the memory-sync actor to
        probe the rooms whose ops the relay dropped while we were away (never blocks)."""
        sync = await self.sync_inbox()
        if sync is None:
            return
        try:
            sync.send_nowait(Resumed(tuple((r.room, r.first) for r in rooms)))
        except trio.WouldBlock:
            log.info("memory sync is busy; dropped a link-up")

    async def sync_inbox(self) -> trio.MemorySendChannel[MemorySyncInput] | None:
        """The memory-sync actor's inbox, started once there is an identity."""
        if self._sync is None and self.daemon.identity is not None:
            actor = MemorySync(
                keys=self.daemon.keys,
                store=self._sync_store(),
                send_op=self._send_room_op,
                presence=self._presence,
                wait_sent=self._wait_sent,
            )
            self._sync = await self.daemon.supervisor.start_actor(SYNC.name, actor)
        return self._sync

    def _sync_store(self) -> StoreAdapter:
        return StoreAdapter(self.daemon.store, self.follower())

    async def start(self) -> None:
        """Start hook: the memory-sync actor, then a probe per room (before rooms start)."""
        sync = await self.sync_inbox()
        if sync is not None:
            await probe(self._sync_store(), self._send_room_op, sync)

    async def _send_room_op(self, room: str, op: RoomOp) -> str:
        return await self.daemon.send_op(room, op)

    async def _presence(self) -> dict[str, bool]:
        send, receive = trio.open_memory_channel[dict[str, bool]](1)
        await self.daemon.router.send(PresenceQuery(send))
        with trio.move_on_after(5.0):
            return await receive.receive()
        return {}

    async def _wait_sent(self, op_id: str) -> bool:
        """Wait until the relay sequences ``op_id`` (True) or refuses it (False)."""
        send, receive = trio.open_memory_channel[int](1)
        await self.daemon.router.send(WatchSent(op_id, send))
        # It may have been sequenced (or refused) before the router took the watch, and then
        # nobody would tell it: look once the watch is queued. The link commits a post's seq
        # before it tells the router, so anything later reaches the router after the watch.
        state = await self.daemon.store.read(lambda c: post_state(c, op_id))
        if state != "queued":
            return state == "sent"
        try:
            await receive.receive()
        except trio.EndOfChannel:
            return False
        return True

    # --- writing ---------------------------------------------------------------------------------

    def identity_label(self) -> str:
        if self.daemon.identity is None:
            raise NotSetUp("There is no identity here yet; pair first: `crosstalk room new`.")
        return self.daemon.identity.label

    async def room_for(self, where: Where) -> Room:
        bound = await trio.to_thread.run_sync(bound_to, where.cwd)
        return await self.daemon.store.read(lambda c: v.choose_room(c, where.room, bound))

    async def rooms_for(self, where: Where) -> list[Room]:
        """The rooms a lookup searches: the named or bound room, else every joined room."""
        if where.room is None and await trio.to_thread.run_sync(bound_to, where.cwd) is None:
            return await self.daemon.store.read(v.joined_rooms)
        return [await self.room_for(where)]

    async def record_in(self, kind: str, where: Where, wanted: str) -> tuple[Room, str]:
        """The room holding the fact or task ``wanted``, after applying our own sequenced ops:
        a task we added whose answer came back ``pending`` is ours to claim once the relay has
        it (a full CI run: "There is no task" for our own task, sequenced a moment before)."""
        rooms = await self.rooms_for(where)
        await self.catch_up_own(rooms)
        return await self.daemon.store.read(lambda c: v.find_record(c, kind, wanted, rooms))

    async def write(self, room: Room, op: MemoryOp) -> Written:
        """Send one memory op and wait (bounded) for its outcome, and whether it is final."""
        envelope = MemoryEnvelope(op, at=time.time(), label=self.identity_label())
        op_id = secrets.token_hex(16)
        now = time.time()
        room_id = room.room_id
        sent, sequenced = trio.open_memory_channel[int](1)
        await self.daemon.router.send(WatchSent(op_id, sent))
        # Its plaintext is kept in the commit that queues it (our own op comes back from the
        # relay as a seq only, and is applied from what is kept here): no write of its own.
        await self.daemon.send_op(
            room_id, envelope, op_id=op_id,
            also=lambda c: m.record_sent(c, room_id, op_id, envelope, now),
        )
        status = self.daemon.link_status()
        written = Written(op_id, None)
        connected = status is not None and status.connected
        wait = self.daemon.heartbeat * OUTCOME_HEARTBEATS if connected else OFFLINE_WAIT
        with trio.move_on_after(wait), contextlib.suppress(trio.EndOfChannel):  # refused
            await sequenced.receive()
            outcome, gave_up = await self._outcome(room.room_id, op_id)
            written = Written(op_id, outcome, final_on(op, gave_ops_up=gave_up))
        if written.outcome is None:
            sync = await self.sync_inbox()
            if sync is not None:
                await sync.send(WatchOwn(room.room_id, op_id))
        else:
            await self.daemon.store.write(lambda c: m.mark_reported(c, op_id))
        return written

    async def _outcome(self, room_id: str, op_id: str) -> tuple[Outcome, bool]:
        """Wait until our sequenced op is applied here (ops before it may still be arriving);
        its outcome, and whether the memory had given ops up (read in the same transaction, so
        a repair in between cannot pair the old outcome with the repaired memory)."""
        follower = self.follower()
        while True:
            changed = self._changed
            await self.daemon.store.write(functools.partial(follower.advance, room_id=room_id))
            found, gave_up = await self.daemon.store.read(
                lambda c: (m.outcome(c, room_id, op_id), m.cursor(c, room_id).conceded)
            )
            if found is not None:
                return found, gave_up
            await changed.wait()

    async def catch_up_own(self, rooms: list[Room]) -> None:
        """Apply our own ops the relay has sequenced (messages too) before showing memory."""
        if self.daemon.identity is None:
            return
        follower = self.follower()
        for room in rooms:
            room_id = room.room_id
            await self.daemon.store.write(functools.partial(follower.advance, room_id=room_id))
