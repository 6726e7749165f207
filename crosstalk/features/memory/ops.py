"""Room memory control ops: facts, tasks, decisions and the working set.

The writes, the applier and the sync actor are
:class:`~crosstalk.features.memory.handle.MemoryFeature`'s; its module says how a write goes from
here to its replicated outcome (``won``/``lost``/``pending``).
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Callable

import trio

from crosstalk.core.working_set import RoomMemory, build_working_set
from crosstalk.errors import NeedsReason, UsageError
from crosstalk.features.feature import ControlOp, Plugs, op
from crosstalk.features.memory import decide as decide_ops
from crosstalk.features.memory import views as v
from crosstalk.features.memory.handle import Host, MemoryFeature, bound_to
from crosstalk.project import repo_root
from crosstalk.store import memory as m
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
from crosstalk.wire.room_ops import MAX_TEXT


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(5)


def _check_text(text: str, what: str) -> None:
    if not text.strip():
        raise UsageError(f"The {what} is empty.")
    if len(text) > MAX_TEXT:
        raise UsageError(f"The {what} is longer than {MAX_TEXT} characters.")


def plug(daemon: Host) -> Plugs:
    """The memory ops, the applier and its batch scope, the listener and the memory-sync actor."""
    feature = MemoryFeature(daemon)
    return Plugs(
        ops=(*_reads(feature), *_facts(feature), *_tasks(feature), decide_ops.decide_op(feature)),
        appliers=(feature.apply,),
        apply_scopes=(feature.batch,),
        applied_listeners=(feature.on_applied,),
        start=(feature.start,),
    )


def _me(feature: MemoryFeature) -> tuple[str | None, str | None]:
    identity = feature.daemon.identity
    if identity is None:
        return None, None
    return feature.daemon.keys.fingerprint, identity.label


def _reads(feature: MemoryFeature) -> tuple[ControlOp, ...]:
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
        bound = await trio.to_thread.run_sync(bound_to, params.cwd)
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

    return (
        op("memory_state", v.Where, memory_state),
        op("facts", v.ListParams, facts),
        op("tasks", v.ListParams, tasks),
        op("working_set", v.WorkingSetParams, working_set),
    )


def _answer(op_id: str, room: Room, outcome: Outcome | None, record_id: str) -> v.WriteReply:
    del op_id
    return v.WriteReply(record_id, room.name, "pending" if outcome is None else outcome.code.value)


def _facts(feature: MemoryFeature) -> tuple[ControlOp, ...]:
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

    return (
        op("fact_add", v.FactAddParams, fact_add),
        op("fact_confirm", v.IdParams, fact_confirm),
        op("fact_correct", v.FactCorrectParams, fact_correct),
        op("fact_forget", v.IdParams, fact_forget),
    )


def _tasks(feature: MemoryFeature) -> tuple[ControlOp, ...]:
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

    return (
        op("task_add", v.TaskAddParams, task_add),
        op("task_claim", v.IdParams, task_claim),
        op("task_release", v.IdParams, task_release),
        op("task_drop", v.IdParams, task_drop),
        op("task_done", v.TaskDoneParams, task_done),
    )
