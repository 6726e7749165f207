"""One room's memory: facts, tasks and decisions, applied from the room log in sequence order.

Theory of operation
-------------------
The relay gives every accepted room op a per-room sequence number: one total order that every
member receives. The room actor opens each op, and for memory ops builds an :class:`OpContext`
from the envelope and calls :meth:`MemoryState.apply`; for any other op in the log (a message, a
membership change) it calls :meth:`MemoryState.skip` so the sequence stays gap-free. The rules for
each kind live in :mod:`crosstalk.core.facts` and :mod:`crosstalk.core.tasks`; decisions are only
recorded; file reservations are a :class:`~crosstalk.core.reservations.ReservationBook` inside
the state, which the ops reach with the relay's time for them (``ctx.relay_ts``). Because every
rule is a function of the state and the op, replicas that apply the same log reach the same
state, and a task claim (or a reservation) has one winner everywhere.

Inputs, in order of ``seq``:
    apply(op, ctx)   a memory op at ``ctx.seq``; returns its :class:`Outcome`
    skip(seq)        a non-memory op at ``seq``
    member_left(fingerprint, seq, relay_ts)   the op at ``seq`` removed or let go a member (their
                     reservations lapse there); otherwise exactly ``skip``
The caller orders. ``seq`` must be exactly ``last_seq + 1``. Two exceptions keep at-least-once
delivery harmless: an op id that was already applied returns its recorded outcome (marked
``duplicate``) and changes nothing, whether it comes again at its old seq (re-delivery) or at a
new seq (the relay sequenced a retried send twice; then ``last_seq`` advances); and ``skip`` of a
seq already passed is a no-op. Anything else (a gap, or an unknown op at an old seq) raises
:class:`LocalProtocolError`, before any change, so the state stays valid: that is why the machine
does not park in an error state (STYLE rule 3) — a caller that re-orders correctly may go on.

Outputs: each op's :class:`Outcome` (kept per op id: ``outcome_of`` answers ``claim`` once the op is
sequenced), :meth:`snapshot` (everything plus ``last_seq``), :func:`canonical_bytes` (stable JSON to
sign and to hash) and :meth:`state_hash`. ``MemoryState.from_snapshot(s)`` followed by the log after
``s.last_seq`` equals a replica that applied the whole log, hash for hash.

Invariants: outcomes hold exactly the op ids applied, each at a seq <= ``last_seq``; nothing is
ever removed from facts, tasks or decisions.

Final and provisional outcomes: a replica whose memory gave ops up (a hole nobody could fill,
conceded; ``store/memory_log.py``) decides later ops without them, and a repair that brings them
back may decide those ops otherwise (sim seeds 418, 437: a reserve granted on such a memory was
refused once repaired). :func:`final_on` says which outcomes a replica may report as final: all
of them on a whole memory; on one that gave ops up, only those of an add (decided by its own
fresh id alone, whatever came before it). The rest are provisional until the memory is whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

import attrs

from crosstalk.core.facts import apply_fact_op
from crosstalk.core.reservations import ReservationBook
from crosstalk.core.tasks import apply_task_op
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire.converter import converter
from crosstalk.wire.memory import (
    SNAPSHOT_VERSION,
    DecisionMade,
    DecisionRecord,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    FactRecord,
    MemoryOp,
    MemorySnapshot,
    OpContext,
    Outcome,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskRecord,
    TaskState,
)
from crosstalk.wire.reservations import (
    ReleaseOp,
    RenewOp,
    ReservationCode,
    ReservationOutcome,
    ReserveOp,
)

_FACT_OPS = (FactAdd, FactConfirm, FactCorrect, FactForget)
_RESERVATION_OPS = (ReserveOp, RenewOp, ReleaseOp)

# What a reservation op did, in the memory outcome every op gets (the book keeps the details).
_RESERVATION_CODES = {
    ReservationCode.GRANTED: OutcomeCode.APPLIED,
    ReservationCode.RENEWED: OutcomeCode.APPLIED,
    ReservationCode.RELEASED: OutcomeCode.APPLIED,
    ReservationCode.REFUSED: OutcomeCode.REFUSED,
    ReservationCode.OVER_LIMIT: OutcomeCode.REFUSED,
    ReservationCode.INVALID: OutcomeCode.INVALID,
    ReservationCode.NOT_FOUND: OutcomeCode.UNKNOWN_ID,
    ReservationCode.NOT_HOLDER: OutcomeCode.NOT_CLAIMER,
    ReservationCode.ALREADY_EXISTS: OutcomeCode.ALREADY_EXISTS,
}


# An add's outcome depends on nothing before it in the log but whether its own fresh (random) id
# was taken; every other op's depends on the ops before it (a claim on who holds the task, a
# reserve on what holds, a confirm on whether the fact was added).
_SELF_STANDING = (FactAdd, TaskAdd, DecisionMade)


def final_on(op: MemoryOp, *, gave_ops_up: bool) -> bool:
    """Whether a replica's outcome for ``op`` is final: the same on every replica, whatever a
    repair later brings back.

    Args:
        op: the applied memory op.
        gave_ops_up: the replica's memory had given ops up (conceded a hole) and was not
            repaired when it decided ``op``.
    """
    return not gave_ops_up or isinstance(op, _SELF_STANDING)


def canonical_bytes(snapshot: MemorySnapshot) -> bytes:
    """The one byte encoding of a snapshot: sorted-key, compact, UTF-8 JSON.

    Sign these bytes to send a snapshot; hash them to compare replicas. A room that never had a
    reservation op has no ``reservations`` key, so its bytes are those of a replica that
    predates reservations.
    """
    data = converter.unstructure(snapshot)
    if data.get("reservations") is None:
        data.pop("reservations", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


class MemoryState:
    """The facts, tasks and decisions of one room, as of op ``last_seq`` of its log."""

    def __init__(self, room_id: str, *, last_seq: int = 0) -> None:
        self.room_id = room_id
        self._last_seq = last_seq
        self._facts: dict[str, FactRecord] = {}
        self._tasks: dict[str, TaskRecord] = {}
        self._decisions: dict[str, DecisionRecord] = {}
        self._outcomes: dict[str, Outcome] = {}
        self._book = ReservationBook(room_id)
        self._book_used = False  # a snapshot carries the book once it has taken an input

    # --- inputs --------------------------------------------------------------------------------

    def apply(self, op: MemoryOp, ctx: OpContext) -> Outcome:
        """Apply one sequenced memory op and return what it did.

        Args:
            op: the memory op from the sealed room op.
            ctx: its envelope: ``seq`` from the relay, verified sender, label, time, op id.

        Returns:
            The op's :class:`Outcome`; for an op id seen before, the recorded one with
            ``duplicate=True``.

        Raises:
            LocalProtocolError: ``ctx.seq`` is not the next one (a gap, or an older seq for an op
                never applied). Nothing changes.
        """
        seen = self._outcomes.get(ctx.op_id)
        if seen is not None:
            if ctx.seq == self._last_seq + 1:
                self._last_seq = ctx.seq
            elif ctx.seq > self._last_seq:
                raise self._out_of_order(ctx.seq)
            return attrs.evolve(seen, duplicate=True)
        if ctx.seq != self._last_seq + 1:
            raise self._out_of_order(ctx.seq)
        outcome = self._dispatch(op, ctx)
        self._outcomes[ctx.op_id] = outcome
        self._last_seq = ctx.seq
        return outcome

    def skip(self, seq: int) -> None:
        """Note that op ``seq`` of the room log is not a memory op.

        Raises:
            LocalProtocolError: ``seq`` leaves a gap after ``last_seq``.
        """
        if seq <= self._last_seq:
            return
        if seq != self._last_seq + 1:
            raise self._out_of_order(seq)
        self._last_seq = seq

    def member_left(self, fingerprint: str, seq: int, relay_ts: float) -> tuple[str, ...]:
        """Op ``seq`` removed ``fingerprint`` from the room (or was their own leave): their
        reservations lapse there. Otherwise the same as :meth:`skip`.

        Returns:
            The ids of the reservations that lapsed because of it.

        Raises:
            LocalProtocolError: ``seq`` leaves a gap after ``last_seq``, or ``relay_ts`` is not
                a time.
        """
        if seq <= self._last_seq:
            return ()
        if seq != self._last_seq + 1:
            raise self._out_of_order(seq)
        gone = self._book.member_left(fingerprint, seq=seq, relay_ts=relay_ts)
        self._book_used = True
        self._last_seq = seq
        return gone

    # --- queries -------------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        """The sequence number of the last op applied or skipped (0 before any)."""
        return self._last_seq

    def outcome_of(self, op_id: str) -> Outcome | None:
        """The outcome of an applied op, or None if it has not been sequenced here yet."""
        return self._outcomes.get(op_id)

    def fact(self, fact_id: str) -> FactRecord | None:
        """The fact with this id, live or forgotten."""
        return self._facts.get(fact_id)

    def facts(self, *, include_forgotten: bool = False) -> list[FactRecord]:
        """Facts in the order they were added."""
        chosen = (f for f in self._facts.values() if include_forgotten or f.live)
        return sorted(chosen, key=lambda f: (f.added_seq, f.fact_id))

    def task(self, task_id: str) -> TaskRecord | None:
        """The task with this id, in any state."""
        return self._tasks.get(task_id)

    def tasks(self, *, include_closed: bool = False) -> list[TaskRecord]:
        """Tasks in the order they were added; without ``include_closed``, only open and claimed."""
        active = (TaskState.OPEN, TaskState.CLAIMED)
        chosen = (t for t in self._tasks.values() if include_closed or t.state in active)
        return sorted(chosen, key=lambda t: (t.added_seq, t.task_id))

    def decision(self, decision_id: str) -> DecisionRecord | None:
        """The decision with this id."""
        return self._decisions.get(decision_id)

    def decisions(self) -> list[DecisionRecord]:
        """Decisions in log order."""
        return sorted(self._decisions.values(), key=lambda d: (d.seq, d.decision_id))

    @property
    def reservations(self) -> ReservationBook:
        """The room's file reservations (read it; only :meth:`apply` changes it)."""
        return self._book

    def reservation_outcome(self, op_id: str) -> ReservationOutcome | None:
        """What a sequenced reservation op did, in detail (who holds what it overlapped)."""
        return self._book.outcome_of(op_id)

    # --- snapshots and hashing -----------------------------------------------------------------

    def snapshot(self) -> MemorySnapshot:
        """Everything this replica knows, in canonical order, as of ``last_seq``."""
        return MemorySnapshot(
            room_id=self.room_id,
            last_seq=self._last_seq,
            facts=tuple(sorted(self._facts.values(), key=lambda f: f.fact_id)),
            tasks=tuple(sorted(self._tasks.values(), key=lambda t: t.task_id)),
            decisions=tuple(sorted(self._decisions.values(), key=lambda d: d.decision_id)),
            outcomes=tuple(sorted(self._outcomes.values(), key=lambda o: (o.seq, o.op_id))),
            reservations=self._book.snapshot() if self._book_used else None,
        )

    def state_hash(self) -> str:
        """SHA-256 (hex) of the canonical bytes of :meth:`snapshot`: equal iff replicas agree."""
        return hashlib.sha256(canonical_bytes(self.snapshot())).hexdigest()

    @classmethod
    def from_snapshot(cls, snapshot: MemorySnapshot) -> MemoryState:
        """Start from a snapshot (already verified by its signature), ready for op ``last_seq + 1``.

        Raises:
            RemoteProtocolError: the snapshot contradicts itself (duplicate ids, an outcome after
                ``last_seq``, an unknown version). Its sender's data is not adopted.
        """
        _check_snapshot(snapshot)
        state = cls(snapshot.room_id, last_seq=snapshot.last_seq)
        state._facts = {f.fact_id: f for f in snapshot.facts}
        state._tasks = {t.task_id: t for t in snapshot.tasks}
        state._decisions = {d.decision_id: d for d in snapshot.decisions}
        state._outcomes = {o.op_id: attrs.evolve(o, duplicate=False) for o in snapshot.outcomes}
        if snapshot.reservations is not None:
            if snapshot.reservations.room_id != snapshot.room_id:
                raise RemoteProtocolError("memory snapshot holds another room's reservations")
            if snapshot.reservations.last_seq > snapshot.last_seq:
                raise RemoteProtocolError("memory snapshot holds reservations after its last_seq")
            state._book = ReservationBook.from_snapshot(snapshot.reservations)
            state._book_used = True
        return state

    # --- internals -----------------------------------------------------------------------------

    def _dispatch(self, op: MemoryOp, ctx: OpContext) -> Outcome:
        winner: Person | None = None
        if isinstance(op, _FACT_OPS):
            record, code = apply_fact_op(self._facts.get(op.fact_id), op, ctx)
            if record is not None:
                self._facts[record.fact_id] = record
        elif isinstance(op, DecisionMade):
            code = self._decide(op, ctx)
        elif isinstance(op, _RESERVATION_OPS):
            code, winner = self._reserve(op, ctx)
        else:
            result = apply_task_op(self._tasks.get(op.task_id), op, ctx)
            if result.record is not None:
                self._tasks[result.record.task_id] = result.record
            code, winner = result.code, result.winner
        return Outcome(op_id=ctx.op_id, seq=ctx.seq, code=code, winner=winner)

    def _decide(self, op: DecisionMade, ctx: OpContext) -> OutcomeCode:
        if op.decision_id in self._decisions:
            return OutcomeCode.ALREADY_EXISTS
        self._decisions[op.decision_id] = DecisionRecord(
            decision_id=op.decision_id,
            text=op.text,
            why=op.why,
            repo=op.repo,
            by=ctx.person,
            at=ctx.ts,
            seq=ctx.seq,
        )
        return OutcomeCode.APPLIED

    def _reserve(
        self, op: ReserveOp | RenewOp | ReleaseOp, ctx: OpContext
    ) -> tuple[OutcomeCode, Person | None]:
        # The relay's time decides lapses on every replica. The author's clock stands in only on
        # the author's own replica behind a relay too old to say (docs/deploy.md): its pushes
        # to everyone else always carried the time.
        relay_ts = ctx.relay_ts or ctx.ts
        done = self._book.apply(
            op, sender=ctx.person, seq=ctx.seq, relay_ts=relay_ts, op_id=ctx.op_id
        )
        self._book_used = True
        blocker = done.conflict.holder if done.conflict is not None else done.holder
        return _RESERVATION_CODES[done.code], blocker

    def _out_of_order(self, seq: int) -> LocalProtocolError:
        return LocalProtocolError(
            f"room {self.room_id}: memory op at seq {seq} arrived after seq {self._last_seq}; "
            f"ops must be applied in room-log order with no gaps."
        )


def _unique(ids: Iterable[str], what: str) -> None:
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise RemoteProtocolError(f"memory snapshot lists {what} {item!r} twice")
        seen.add(item)


def _check_snapshot(snapshot: MemorySnapshot) -> None:
    if snapshot.version != SNAPSHOT_VERSION:
        raise RemoteProtocolError(f"memory snapshot version {snapshot.version} is not supported")
    if snapshot.last_seq < 0:
        raise RemoteProtocolError("memory snapshot has a negative last_seq")
    _unique((f.fact_id for f in snapshot.facts), "fact")
    _unique((t.task_id for t in snapshot.tasks), "task")
    _unique((d.decision_id for d in snapshot.decisions), "decision")
    _unique((o.op_id for o in snapshot.outcomes), "op")
    if any(o.seq > snapshot.last_seq for o in snapshot.outcomes):
        raise RemoteProtocolError("memory snapshot holds an outcome after its last_seq")
