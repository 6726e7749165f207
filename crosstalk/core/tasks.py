"""Tasks: the deterministic rules for add, claim, release, done and drop.

Theory of operation
-------------------
:class:`crosstalk.core.memory.MemoryState` calls :func:`apply_task_op` once per task op, in
room-log order, with the record the op names (or None). Every replica applies the same log, so
every replica reaches the same states and the same outcomes, and **a claim has one winner
everywhere**: the first claim in log order on an OPEN task. The relay's sequence number is the only
arbiter; nobody's clock or local view is consulted.

States (:class:`TaskState`) and transitions; "holder" is the claimer of a CLAIMED task::

    add      unknown id -> OPEN                              existing id -> ALREADY_EXISTS
    claim    OPEN -> CLAIMED by sender: WON
             CLAIMED by sender: WON, no change (claiming again is harmless)
             CLAIMED by another: LOST, winner = holder
    release  CLAIMED by sender -> OPEN          CLAIMED by another: NOT_CLAIMER
             OPEN: NOT_CLAIMED
    done     CLAIMED by sender -> DONE          CLAIMED by another: NOT_CLAIMER
             OPEN -> DONE (anyone may finish an unclaimed task, see below)
    drop     OPEN or CLAIMED by sender -> DROPPED     CLAIMED by another: NOT_CLAIMER
    claim/release/done/drop on DONE or DROPPED: CLOSED, no change
    anything but add on an unknown id: UNKNOWN_ID, no change

Decisions (ours, deliberately):
- A claim is a promise "I am doing this now", so only its holder may release, finish or drop a
  claimed task. An unclaimed task may be finished by anyone: someone who did the work should be
  able to say so without a claim-then-done dance, and nobody's promise is overridden.
- ``for_`` says whom a task is meant for; it does not stop someone else from claiming it (the
  working set shows it to its person first).
- Nothing is deleted: a dropped task stays, marked DROPPED with who dropped it.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from crosstalk.wire.memory import (
    OpContext,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRecord,
    TaskRelease,
    TaskState,
)

TaskOp = TaskAdd | TaskClaim | TaskRelease | TaskDone | TaskDrop


@attrs.frozen
class TaskResult:
    """What one task op did: the replacement record (None if unchanged), the code, and for
    claims and NOT_CLAIMER the person who holds the task."""

    record: TaskRecord | None
    code: OutcomeCode
    winner: Person | None = None


def apply_task_op(current: TaskRecord | None, op: TaskOp, ctx: OpContext) -> TaskResult:
    """Apply one task op to the record it names.

    Args:
        current: the task with ``op.task_id``, or None if there is none.
        op: the op, already sequenced by the relay.
        ctx: the op's place in the log and its sender.

    Returns:
        A :class:`TaskResult`; for claims and NOT_CLAIMER its ``winner`` names the holder.
    """
    if isinstance(op, TaskAdd):
        return _add(current, op, ctx)
    if current is None:
        return TaskResult(None, OutcomeCode.UNKNOWN_ID)
    handler = _TRANSITIONS.get((current.state, type(op)))
    if handler is None:
        # DONE and DROPPED are final: every op but add lands here for them.
        return TaskResult(None, OutcomeCode.CLOSED)
    return handler(current, op, ctx)


def _held_by_sender(task: TaskRecord, ctx: OpContext) -> bool:
    return task.claimer is not None and task.claimer.fingerprint == ctx.sender


def _add(current: TaskRecord | None, op: TaskAdd, ctx: OpContext) -> TaskResult:
    if current is not None:
        return TaskResult(None, OutcomeCode.ALREADY_EXISTS)
    record = TaskRecord(
        task_id=op.task_id,
        text=op.text,
        for_=op.for_,
        created_by=ctx.person,
        added_at=ctx.ts,
        added_seq=ctx.seq,
    )
    return TaskResult(record, OutcomeCode.APPLIED)


def _claim_open(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    claimed = attrs.evolve(task, state=TaskState.CLAIMED, claimer=ctx.person, claimed_at=ctx.ts)
    return TaskResult(claimed, OutcomeCode.WON, winner=ctx.person)


def _claim_claimed(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    if _held_by_sender(task, ctx):
        return TaskResult(None, OutcomeCode.WON, winner=task.claimer)
    return TaskResult(None, OutcomeCode.LOST, winner=task.claimer)


def _release_open(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    return TaskResult(None, OutcomeCode.NOT_CLAIMED)


def _release_claimed(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    if not _held_by_sender(task, ctx):
        return TaskResult(None, OutcomeCode.NOT_CLAIMER, winner=task.claimer)
    released = attrs.evolve(task, state=TaskState.OPEN, claimer=None, claimed_at=None)
    return TaskResult(released, OutcomeCode.APPLIED)


def _close(task: TaskRecord, ctx: OpContext, state: TaskState, note: str) -> TaskResult:
    closed = attrs.evolve(
        task,
        state=state,
        claimer=None,
        claimed_at=None,
        closed_by=ctx.person,
        closed_at=ctx.ts,
        note=note,
    )
    return TaskResult(closed, OutcomeCode.APPLIED)


def _done_open(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    assert isinstance(op, TaskDone)
    return _close(task, ctx, TaskState.DONE, op.note)


def _done_claimed(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    if not _held_by_sender(task, ctx):
        return TaskResult(None, OutcomeCode.NOT_CLAIMER, winner=task.claimer)
    return _done_open(task, op, ctx)


def _drop_open(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    return _close(task, ctx, TaskState.DROPPED, "")


def _drop_claimed(task: TaskRecord, op: TaskOp, ctx: OpContext) -> TaskResult:
    if not _held_by_sender(task, ctx):
        return TaskResult(None, OutcomeCode.NOT_CLAIMER, winner=task.claimer)
    return _drop_open(task, op, ctx)


_Handler = Callable[[TaskRecord, TaskOp, OpContext], TaskResult]

# (state, op kind) -> transition. A pair missing here means the task is closed (DONE/DROPPED).
_TRANSITIONS: dict[tuple[TaskState, type], _Handler] = {
    (TaskState.OPEN, TaskClaim): _claim_open,
    (TaskState.OPEN, TaskRelease): _release_open,
    (TaskState.OPEN, TaskDone): _done_open,
    (TaskState.OPEN, TaskDrop): _drop_open,
    (TaskState.CLAIMED, TaskClaim): _claim_claimed,
    (TaskState.CLAIMED, TaskRelease): _release_claimed,
    (TaskState.CLAIMED, TaskDone): _done_claimed,
    (TaskState.CLAIMED, TaskDrop): _drop_claimed,
}
