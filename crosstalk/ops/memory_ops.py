"""Room memory control ops: facts, tasks, decisions and the working set; the memory applier.

A write builds a memory op, keeps its plaintext (``memory_sent``: the relay never echoes our own
op, so we apply it ourselves at the seq it gets), has the room actor seal it and commit it to the
outbox, then waits a bounded time for the relay to sequence it and for the op to be applied here.
The reply carries the replicated outcome (for a claim: ``won`` or ``lost`` with the holder, the
same on every replica), or ``pending`` when the relay did not sequence it in time; the memory-sync
actor then watches it and reports the outcome when it is decided.
"""

from __future__ import annotations

import functools
import logging
import secrets
import sqlite3
import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import trio

from crosstalk.actors.control import OpTable
from crosstalk.actors.memory_sync import (
    Answer,
    MemorySync,
    MemorySyncInput,
    Nudge,
    StoreAdapter,
    WatchOwn,
    probe,
)
from crosstalk.actors.router import PresenceQuery, WatchSent
from crosstalk.core.room import Applied
from crosstalk.core.working_set import RoomMemory, build_working_set
from crosstalk.daemon import Daemon
from crosstalk.errors import NeedsReason, NotSetUp, UsageError
from crosstalk.ops import decide_ops
from crosstalk.ops import memory_views as v
from crosstalk.project import bound_room, repo_root
from crosstalk.store import memory as m
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Room, contact_named
from crosstalk.wire.memory import (
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    Outcome,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRelease,
)
from crosstalk.wire.room_ops import MAX_TEXT, MemoryEnvelope, RoomOp, SyncRequest

log = logging.getLogger(__name__)

# Connected: a write waits this many heartbeats for its replicated outcome. A live link proves
# itself within one (it pings at a quarter heartbeat), so past two it is as good as down.
OUTCOME_HEARTBEATS = 2.0
OFFLINE_WAIT = 1.0  # not connected: answer `pending` quickly


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(5)


class MemoryFeature:
    """The memory feature's handles inside one daemon."""

    def __init__(self, daemon: Daemon) -> None:
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
            Answer(entry.room_id, entry.op.request_id, entry.sender)
            for entry in applied
            if isinstance(entry.op, SyncRequest) and entry.op.ask == me and entry.sender != me
        ]
        wanted.append(Nudge(tuple(sorted({e.room_id for e in applied}))))
        for item in wanted:
            try:
                sync.send_nowait(item)
            except trio.WouldBlock:
                log.info("memory sync is busy; dropped %s", type(item).__name__)

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
            self._sync = await self.daemon.supervisor.start_actor("memory_sync", actor)
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
        assert self.daemon.router is not None
        send, receive = trio.open_memory_channel[dict[str, bool]](1)
        await self.daemon.router.send(PresenceQuery(send))
        with trio.move_on_after(5.0):
            return await receive.receive()
        return {}

    async def _wait_sent(self, op_id: str) -> None:
        assert self.daemon.router is not None
        send, receive = trio.open_memory_channel[int](1)
        await self.daemon.router.send(WatchSent(op_id, send))
        await receive.receive()

    # --- writing ---------------------------------------------------------------------------------

    def identity_label(self) -> str:
        if self.daemon.identity is None:
            raise NotSetUp("There is no identity here yet; pair first: `crosstalk room new`.")
        return self.daemon.identity.label

    async def room_for(self, where: v.Where) -> Room:
        bound = await trio.to_thread.run_sync(_bound, where.cwd)
        return await self.daemon.store.read(lambda c: v.choose_room(c, where.room, bound))

    async def rooms_for(self, where: v.Where) -> list[Room]:
        """The rooms a lookup searches: the named or bound room, else every joined room."""
        if where.room is None and await trio.to_thread.run_sync(_bound, where.cwd) is None:
            return await self.daemon.store.read(v.joined_rooms)
        return [await self.room_for(where)]

    async def record_in(self, kind: str, where: v.Where, wanted: str) -> tuple[Room, str]:
        rooms = await self.rooms_for(where)
        return await self.daemon.store.read(lambda c: v.find_record(c, kind, wanted, rooms))

    async def write(self, room: Room, op: MemoryOp) -> tuple[str, Outcome | None]:
        """Send one memory op and wait (bounded) for its outcome; None means pending."""
        envelope = MemoryEnvelope(op, at=time.time(), label=self.identity_label())
        op_id = secrets.token_hex(16)
        now = time.time()
        room_id = room.room_id
        await self.daemon.store.write(lambda c: m.record_sent(c, room_id, op_id, envelope, now))
        assert self.daemon.router is not None
        sent, sequenced = trio.open_memory_channel[int](1)
        await self.daemon.router.send(WatchSent(op_id, sent))
        await self.daemon.send_op(room.room_id, envelope, op_id=op_id)
        status = self.daemon.link_status()
        outcome: Outcome | None = None
        connected = status is not None and status.connected
        wait = self.daemon.heartbeat * OUTCOME_HEARTBEATS if connected else OFFLINE_WAIT
        with trio.move_on_after(wait):
            await sequenced.receive()
            outcome = await self._outcome(room.room_id, op_id)
        if outcome is None:
            sync = await self.sync_inbox()
            if sync is not None:
                await sync.send(WatchOwn(room.room_id, op_id))
        else:
            await self.daemon.store.write(lambda c: m.mark_reported(c, op_id))
        return op_id, outcome

    async def _outcome(self, room_id: str, op_id: str) -> Outcome:
        """Wait until our sequenced op is applied here (ops before it may still be arriving)."""
        follower = self.follower()
        while True:
            changed = self._changed
            await self.daemon.store.write(functools.partial(follower.advance, room_id=room_id))
            found = await self.daemon.store.read(lambda c: m.outcome(c, room_id, op_id))
            if found is not None:
                return found
            await changed.wait()

    async def catch_up_own(self, rooms: list[Room]) -> None:
        """Apply our own ops the relay has sequenced (messages too) before showing memory."""
        if self.daemon.identity is None:
            return
        follower = self.follower()
        for room in rooms:
            room_id = room.room_id
            await self.daemon.store.write(functools.partial(follower.advance, room_id=room_id))


def _bound(cwd: str | None) -> str | None:
    root = repo_root(cwd) if cwd else None
    return bound_room(root) if root is not None else None


def _check_text(text: str, what: str) -> None:
    if not text.strip():
        raise UsageError(f"The {what} is empty.")
    if len(text) > MAX_TEXT:
        raise UsageError(f"The {what} is longer than {MAX_TEXT} characters.")


def register(ops: OpTable, daemon: Daemon) -> None:
    """Register the memory ops, the applier, the listener and the memory-sync actor."""
    feature = MemoryFeature(daemon)
    daemon.appliers.append(feature.apply)
    daemon.apply_scopes.append(feature.batch)
    daemon.applied_listeners.append(feature.on_applied)
    daemon.on_start.append(feature.start)
    _register_reads(ops, feature)
    _register_facts(ops, feature)
    _register_tasks(ops, feature)
    decide_ops.register(ops, feature)


def _me(feature: MemoryFeature) -> tuple[str | None, str | None]:
    identity = feature.daemon.identity
    if identity is None:
        return None, None
    return feature.daemon.keys.fingerprint, identity.label


def _register_reads(ops: OpTable, feature: MemoryFeature) -> None:
    store = feature.daemon.store

    async def listing(params: v.ListParams, facts: bool) -> v.FactsReply | v.TasksReply:
        rooms = await feature.rooms_for(v.Where(params.room, params.cwd))
        await feature.catch_up_own(rooms)
        me, label = _me(feature)
        now = time.time()
        return await store.read(
            lambda c: v.list_memory(
                c, rooms, facts=facts, include_all=params.all, now=now, me=me, my_label=label
            )
        )

    async def facts(params: v.ListParams) -> v.FactsReply | v.TasksReply:
        return await listing(params, True)

    async def tasks(params: v.ListParams) -> v.FactsReply | v.TasksReply:
        return await listing(params, False)

    async def working_set(params: v.WorkingSetParams) -> v.WorkingSetReply:
        root = await trio.to_thread.run_sync(lambda: repo_root(params.cwd) if params.cwd else None)
        repo = params.repo or (root.name if root is not None else None)
        bound = await trio.to_thread.run_sync(_bound, params.cwd)
        me, label = _me(feature)
        if me is None:
            return v.WorkingSetReply("", repo, 0, 0)

        def gather(conn: sqlite3.Connection) -> tuple[list[RoomMemory], dict[str, str]]:
            rooms = sorted(v.joined_rooms(conn), key=lambda r: r.room_id != bound)
            memory = [RoomMemory(r.name, m.load_state(conn, r.room_id)) for r in rooms]
            return memory, v.names(conn, me, label)

        memory, known = await store.read(gather)
        chosen = build_working_set(memory, me=me, repo=repo, now=time.time(), names=known)
        return v.WorkingSetReply(chosen.render(), repo, chosen.facts_total, chosen.tasks_total)

    async def memory_state(params: v.Where) -> v.MemoryStateReply:
        rooms = await feature.rooms_for(params)
        await feature.catch_up_own(rooms)
        return await store.read(lambda c: v.memory_state(c, rooms))

    ops.add("memory_state", v.Where, memory_state)
    ops.add("facts", v.ListParams, facts)
    ops.add("tasks", v.ListParams, tasks)
    ops.add("working_set", v.WorkingSetParams, working_set)


def _answer(op_id: str, room: Room, outcome: Outcome | None, record_id: str) -> v.WriteReply:
    del op_id
    return v.WriteReply(record_id, room.name, "pending" if outcome is None else outcome.code.value)


def _register_facts(ops: OpTable, feature: MemoryFeature) -> None:
    async def fact_add(params: v.FactAddParams) -> v.WriteReply:
        _check_text(params.text, "fact")
        tags = tuple(sorted({t.strip() for t in params.tags if t.strip()}))
        room = await feature.room_for(v.Where(params.room, params.cwd))
        fact_id = _new_id("f")
        op_id, outcome = await feature.write(room, FactAdd(fact_id, params.text, tags))
        return _answer(op_id, room, outcome, fact_id)

    async def fact_confirm(params: v.IdParams) -> v.WriteReply:
        room, fact_id = await feature.record_in("fact", v.Where(params.room, params.cwd), params.id)
        op_id, outcome = await feature.write(room, FactConfirm(fact_id))
        return _answer(op_id, room, outcome, fact_id)

    async def fact_correct(params: v.FactCorrectParams) -> v.WriteReply:
        if not params.because.strip():
            raise NeedsReason("Say why the fact is wrong: --because WHY.")
        room, fact_id = await feature.record_in("fact", v.Where(params.room, params.cwd), params.id)
        if params.text is None:  # no new text: the fact is retired
            op_id, outcome = await feature.write(room, FactForget(fact_id))
        else:
            _check_text(params.text, "corrected fact")
            op: MemoryOp = FactCorrect(fact_id, params.text, params.because)
            op_id, outcome = await feature.write(room, op)
        return _answer(op_id, room, outcome, fact_id)

    async def fact_forget(params: v.IdParams) -> v.WriteReply:
        room, fact_id = await feature.record_in("fact", v.Where(params.room, params.cwd), params.id)
        op_id, outcome = await feature.write(room, FactForget(fact_id))
        return _answer(op_id, room, outcome, fact_id)

    ops.add("fact_add", v.FactAddParams, fact_add)
    ops.add("fact_confirm", v.IdParams, fact_confirm)
    ops.add("fact_correct", v.FactCorrectParams, fact_correct)
    ops.add("fact_forget", v.IdParams, fact_forget)


def _register_tasks(ops: OpTable, feature: MemoryFeature) -> None:
    store = feature.daemon.store

    async def task_add(params: v.TaskAddParams) -> v.WriteReply:
        _check_text(params.text, "task")
        room = await feature.room_for(v.Where(params.room, params.cwd))
        person: Person | None = None
        if params.person:
            me, label = _me(feature)
            if params.person in ("me", label) and me is not None and label is not None:
                person = Person(me, label)
            else:
                contact = await store.read(lambda c: contact_named(c, params.person or ""))
                person = Person(contact.fingerprint, contact.label)
        task_id = _new_id("t")
        op_id, outcome = await feature.write(room, TaskAdd(task_id, params.text, person))
        return _answer(op_id, room, outcome, task_id)

    async def task_claim(params: v.IdParams) -> v.ClaimReply:
        room, task_id = await feature.record_in("task", v.Where(params.room, params.cwd), params.id)
        _op_id, outcome = await feature.write(room, TaskClaim(task_id))
        if outcome is None:
            return v.ClaimReply(task_id, room.name, "pending", None)
        me, label = _me(feature)
        known = await store.read(lambda c: v.names(c, me, label))
        winner = outcome.winner
        holder = known.get(winner.fingerprint, winner.label) if winner is not None else None
        return v.ClaimReply(task_id, room.name, outcome.claim_answer or "lost", holder)

    async def simple(where: v.Where, wanted: str, make: Callable[[str], MemoryOp]) -> v.WriteReply:
        room, task_id = await feature.record_in("task", where, wanted)
        op_id, outcome = await feature.write(room, make(task_id))
        return _answer(op_id, room, outcome, task_id)

    async def task_release(params: v.IdParams) -> v.WriteReply:
        return await simple(v.Where(params.room, params.cwd), params.id, TaskRelease)

    async def task_drop(params: v.IdParams) -> v.WriteReply:
        return await simple(v.Where(params.room, params.cwd), params.id, TaskDrop)

    async def task_done(params: v.TaskDoneParams) -> v.WriteReply:
        return await simple(
            v.Where(params.room, params.cwd), params.id, lambda i: TaskDone(i, params.note)
        )

    ops.add("task_add", v.TaskAddParams, task_add)
    ops.add("task_claim", v.IdParams, task_claim)
    ops.add("task_release", v.IdParams, task_release)
    ops.add("task_drop", v.IdParams, task_drop)
    ops.add("task_done", v.TaskDoneParams, task_done)
