"""Room memory control ops: facts, tasks, decisions and the working set.

The writes, the applier and the sync actor are
:class:`~crosstalk.features.memory.handle.MemoryFeature`'s; its module says how a write goes from
here to its replicated outcome (``won``/``lost``/``pending``).
"""

from __future__ import annotations

import functools
import secrets
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import trio

from crosstalk import sim_hooks
from crosstalk.actors.control import Handler
from crosstalk.core.working_set import RoomMemory, build_working_set
from crosstalk.errors import NeedsReason, UsageError
from crosstalk.features.feature import ControlOp, Plugs, op
from crosstalk.features.memory import decide as decide_ops
from crosstalk.features.memory import views as v
from crosstalk.features.memory.handle import SYNC, Host, MemoryFeature, Written
from crosstalk.features.memory.reserve import reservation_ops
from crosstalk.project import bound_room, repo_root
from crosstalk.store import memory as m
from crosstalk.store.reservations import relay_now
from crosstalk.store.rooms import Room, contact_named
from crosstalk.wire.control.params import (
    FactAddParams,
    FactCorrectParams,
    IdParams,
    ListParams,
    TaskAddParams,
    TaskDoneParams,
    Where,
    WorkingSetParams,
)
from crosstalk.wire.control.replies.memory import (
    MEMORY_INCOMPLETE,
    UNDECIDED,
    ClaimReply,
    FactsReply,
    MemoryStateReply,
    TasksReply,
    WorkingSetReply,
    WriteReply,
)
from crosstalk.wire.control.table_memory import (
    FACT_ADD,
    FACT_CONFIRM,
    FACT_CORRECT,
    FACT_FORGET,
    FACTS,
    MEMORY_STATE,
    TASK_ADD,
    TASK_CLAIM,
    TASK_DONE,
    TASK_DROP,
    TASK_RELEASE,
    TASKS,
    WORKING_SET,
)
from crosstalk.wire.memory import (
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRelease,
)
from crosstalk.wire.room_ops import MAX_TEXT, Rekey, RoomOp


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(5)


def _check_text(text: str, what: str) -> None:
    if not text.strip():
        raise UsageError(f"The {what} is empty.")
    if len(text) > MAX_TEXT:
        raise UsageError(f"The {what} is longer than {MAX_TEXT} characters.")


def _me(feature: MemoryFeature) -> tuple[str | None, str | None]:
    identity = feature.daemon.identity
    if identity is None:
        return None, None
    return feature.daemon.keys.fingerprint, identity.label


def _answer(room: Room, written: Written, record_id: str) -> WriteReply:
    outcome = written.outcome
    if outcome is None:
        return WriteReply(record_id, room.name, "pending", UNDECIDED)
    if not written.final:
        sim_hooks.probe("memory.answer_provisional")
        return WriteReply(record_id, room.name, "pending", MEMORY_INCOMPLETE, outcome.code.value)
    return WriteReply(record_id, room.name, outcome.code.value)


async def listing(
    feature: MemoryFeature, facts: bool, params: ListParams
) -> FactsReply | TasksReply:
    """The facts (or the tasks) of the rooms asked about, after catching up on our own."""
    rooms = await feature.rooms_for(Where(params.room, params.cwd))
    await feature.catch_up_own(rooms)
    me, label = _me(feature)
    now = time.time()
    return await feature.daemon.store.read(
        lambda c: v.list_memory(
            c, rooms, facts=facts, include_all=params.all, now=now, me=me, my_label=label
        )
    )


def _place(cwd: str | None) -> tuple[Path | None, str | None]:
    """The repository at ``cwd`` and the room it is bound to (blocking: run in a thread)."""
    root = repo_root(cwd) if cwd else None
    return root, bound_room(root) if root is not None else None


async def working_set(feature: MemoryFeature, params: WorkingSetParams) -> WorkingSetReply:
    """What a session is shown at its start: the memory of our rooms, this repo's room first."""
    # One trip to a worker thread for both (each trip waits twice for a thread to be
    # scheduled, which a loaded machine stretches): every session start asks for this.
    root, bound = await trio.to_thread.run_sync(_place, params.cwd)
    repo = params.repo or (root.name if root is not None else None)
    me, label = _me(feature)
    if me is None:
        return WorkingSetReply("", repo, 0, 0)

    def gather(conn: sqlite3.Connection) -> tuple[list[RoomMemory], dict[str, str], float]:
        rooms = sorted(v.joined_rooms(conn), key=lambda r: r.room_id != bound)
        memory = [RoomMemory(r.name, m.load_state(conn, r.room_id)) for r in rooms]
        return memory, v.names(conn, me, label), relay_now(conn)

    memory, known, at = await feature.daemon.store.read(gather)
    chosen = build_working_set(
        memory, me=me, repo=repo, now=time.time(), names=known, relay_now=at
    )
    return WorkingSetReply(chosen.render(), repo, chosen.facts_total, chosen.tasks_total)


async def memory_state(feature: MemoryFeature, params: Where) -> MemoryStateReply:
    rooms = await feature.rooms_for(params)
    await feature.catch_up_own(rooms)
    return await feature.daemon.store.read(lambda c: v.memory_state(c, rooms))


async def fact_add(feature: MemoryFeature, params: FactAddParams) -> WriteReply:
    _check_text(params.text, "fact")
    tags = tuple(sorted({t.strip() for t in params.tags if t.strip()}))
    room = await feature.room_for(Where(params.room, params.cwd))
    fact_id = _new_id("f")
    written = await feature.write(room, FactAdd(fact_id, params.text, tags))
    return _answer(room, written, fact_id)


async def fact_correct(feature: MemoryFeature, params: FactCorrectParams) -> WriteReply:
    """Correct a fact's text, saying why; with no new text the fact is retired."""
    if not params.because.strip():
        raise NeedsReason("Say why the fact is wrong: --because WHY.")
    room, fact_id = await feature.record_in("fact", Where(params.room, params.cwd), params.id)
    op: MemoryOp = FactForget(fact_id)
    if params.text is not None:
        _check_text(params.text, "corrected fact")
        op = FactCorrect(fact_id, params.text, params.because)
    return _answer(room, await feature.write(room, op), fact_id)


async def _person(feature: MemoryFeature, name: str) -> Person:
    """Whom a task is for: ``me`` (or our own label), else a contact by name."""
    me, label = _me(feature)
    if name in ("me", label) and me is not None and label is not None:
        return Person(me, label)
    contact = await feature.daemon.store.read(lambda c: contact_named(c, name))
    return Person(contact.fingerprint, contact.label)


async def task_add(feature: MemoryFeature, params: TaskAddParams) -> WriteReply:
    _check_text(params.text, "task")
    room = await feature.room_for(Where(params.room, params.cwd))
    person = await _person(feature, params.person) if params.person else None
    task_id = _new_id("t")
    written = await feature.write(room, TaskAdd(task_id, params.text, person))
    return _answer(room, written, task_id)


async def task_claim(feature: MemoryFeature, params: IdParams) -> ClaimReply:
    """Claim a task; the answer says who holds it once the claims are ordered."""
    room, task_id = await feature.record_in("task", Where(params.room, params.cwd), params.id)
    written = await feature.write(room, TaskClaim(task_id))
    outcome = written.outcome
    if outcome is None:
        sim_hooks.probe("memory.claim_pending")
        return ClaimReply(task_id, room.name, "pending", None, UNDECIDED)
    me, label = _me(feature)
    known = await feature.daemon.store.read(lambda c: v.names(c, me, label))
    winner = outcome.winner
    holder = known.get(winner.fingerprint, winner.label) if winner is not None else None
    answer = outcome.claim_answer or "lost"
    if not written.final:
        sim_hooks.probe("memory.answer_provisional")
        return ClaimReply(task_id, room.name, "pending", holder, MEMORY_INCOMPLETE, answer)
    return ClaimReply(task_id, room.name, answer, holder)


async def _on_record(
    feature: MemoryFeature, kind: str, make: Callable[[str], MemoryOp], params: IdParams
) -> WriteReply:
    """Write ``make(record id)`` about an existing fact or task (``kind``) named by its id."""
    room, record_id = await feature.record_in(kind, Where(params.room, params.cwd), params.id)
    return _answer(room, await feature.write(room, make(record_id)), record_id)


async def task_done(feature: MemoryFeature, params: TaskDoneParams) -> WriteReply:
    ids = IdParams(params.id, params.room, params.cwd)
    return await _on_record(feature, "task", lambda i: TaskDone(i, params.note), ids)


def plug(daemon: Host) -> Plugs:
    """The memory ops, the applier and its batch scope, the listener and the memory-sync actor."""
    feature = MemoryFeature(daemon)
    return Plugs(
        ops=(
            *_read_ops(feature), *_write_ops(feature), decide_ops.decide_op(feature),
            *reservation_ops(feature),
        ),
        appliers=(feature.apply,),
        sent_writers=(_keep_removal,),
        sent_listeners=(feature.on_sent,),
        apply_scopes=(feature.batch,),
        applied_listeners=(feature.on_applied,),
        start=(feature.start,),
        spawns=(SYNC,),
        link_up_listeners=(feature.on_link_up,),
    )


def _keep_removal(conn: sqlite3.Connection, room_id: str, op_id: str, op: RoomOp) -> None:
    """Sent writer: our own rekey names whom we removed; memory applies it at its seq."""
    if isinstance(op, Rekey):
        m.record_sent_removal(conn, room_id, op_id, op)


def _read_ops(feature: MemoryFeature) -> tuple[ControlOp, ...]:
    return (
        op(MEMORY_STATE, functools.partial(memory_state, feature)),
        op(FACTS, functools.partial(listing, feature, True)),
        op(TASKS, functools.partial(listing, feature, False)),
        op(WORKING_SET, functools.partial(working_set, feature)),
    )


def _write_ops(feature: MemoryFeature) -> tuple[ControlOp, ...]:
    def on_record(kind: str, make: Callable[[str], MemoryOp]) -> Handler[IdParams]:
        return functools.partial(_on_record, feature, kind, make)

    return (
        op(FACT_ADD, functools.partial(fact_add, feature)),
        op(FACT_CONFIRM, on_record("fact", FactConfirm)),
        op(FACT_CORRECT, functools.partial(fact_correct, feature)),
        op(FACT_FORGET, on_record("fact", FactForget)),
        op(TASK_ADD, functools.partial(task_add, feature)),
        op(TASK_CLAIM, functools.partial(task_claim, feature)),
        op(TASK_RELEASE, on_record("task", TaskRelease)),
        op(TASK_DROP, on_record("task", TaskDrop)),
        op(TASK_DONE, functools.partial(task_done, feature)),
    )
