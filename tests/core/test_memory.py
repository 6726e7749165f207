"""MemoryState: sequencing, idempotency, and the fact, task and decision rules."""

from __future__ import annotations

import attrs
import pytest

from crosstalk.core.memory import MemoryState
from crosstalk.errors import LocalProtocolError
from crosstalk.wire.memory import (
    DecisionMade,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    OpContext,
    Outcome,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRelease,
    TaskState,
)

MARIE = Person("aaaa-aaaa-aaaa-aaaa", "marie")
JO = Person("bbbb-bbbb-bbbb-bbbb", "jo")
KIM = Person("cccc-cccc-cccc-cccc", "kim")
T0 = 1_800_000_000.0
DAY = 86400.0


class Log:
    """A fake room log: like the relay, it gives every op the next sequence number."""

    def __init__(self) -> None:
        self.entries: list[tuple[MemoryOp | None, OpContext]] = []

    def add(
        self, who: Person, op: MemoryOp | None, *, ts: float = T0, op_id: str | None = None
    ) -> OpContext:
        """Sequence ``op`` (None: a non-memory op such as a message) from ``who``."""
        seq = len(self.entries) + 1
        ctx = OpContext(
            seq=seq,
            op_id=op_id or f"op-{seq}",
            sender=who.fingerprint,
            sender_label=who.label,
            ts=ts,
        )
        self.entries.append((op, ctx))
        return ctx

    def feed(self, state: MemoryState, start: int = 0, stop: int | None = None) -> list[Outcome]:
        """Apply entries ``[start:stop]`` to ``state`` in order; return memory ops' outcomes."""
        outcomes = []
        for op, ctx in self.entries[start:stop]:
            if op is None:
                state.skip(ctx.seq)
            else:
                outcomes.append(state.apply(op, ctx))
        return outcomes


class Room:
    """One replica fed live: every op is sequenced and applied at once."""

    def __init__(self) -> None:
        self.log = Log()
        self.state = MemoryState("room-1")

    def do(self, who: Person, op: MemoryOp, *, ts: float = T0, op_id: str | None = None) -> Outcome:
        ctx = self.log.add(who, op, ts=ts, op_id=op_id)
        return self.state.apply(op, ctx)


# --- sequencing and idempotency ----------------------------------------------------------------


def test_ops_apply_in_sequence_and_last_seq_follows_the_log() -> None:
    """Each applied or skipped op moves last_seq to its seq."""
    log = Log()
    log.add(MARIE, FactAdd("f1", "uses snake_case"))
    log.add(JO, None)
    log.add(JO, FactConfirm("f1"))
    state = MemoryState("room-1")
    assert state.last_seq == 0
    log.feed(state)
    assert state.last_seq == 3
    fact = state.fact("f1")
    assert fact is not None and [c.by for c in fact.confirmations] == [JO]


def test_a_gap_in_the_sequence_raises_and_changes_nothing() -> None:
    """An op whose seq skips ahead is the caller's ordering bug: LocalProtocolError, no change."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"))
    before = room.state.state_hash()
    ctx = OpContext(seq=3, op_id="late", sender=JO.fingerprint, sender_label="jo", ts=T0)
    with pytest.raises(LocalProtocolError, match="seq 3 arrived after seq 1"):
        room.state.apply(FactConfirm("f1"), ctx)
    assert room.state.state_hash() == before
    assert room.state.last_seq == 1


def test_an_unknown_op_at_an_old_seq_raises() -> None:
    """An op never applied cannot arrive at a seq already passed."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"))
    room.do(MARIE, FactAdd("f2", "y"))
    ctx = OpContext(seq=1, op_id="other", sender=JO.fingerprint, sender_label="jo", ts=T0)
    with pytest.raises(LocalProtocolError):
        room.state.apply(FactConfirm("f1"), ctx)
    assert room.state.last_seq == 2


def test_redelivered_op_returns_its_recorded_outcome_and_changes_nothing() -> None:
    """At-least-once delivery: the same op at the same seq again is a no-op marked duplicate."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "fix it"))
    first = room.do(JO, TaskClaim("t1"))
    before = room.state.state_hash()
    op, ctx = room.log.entries[-1]
    assert op is not None
    again = room.state.apply(op, ctx)
    assert again == attrs.evolve(first, duplicate=True)
    assert room.state.state_hash() == before


def test_op_sequenced_twice_takes_effect_once_and_advances_the_seq() -> None:
    """A retried send the relay sequenced twice: the second copy only moves last_seq."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "old"))
    room.do(JO, FactCorrect("f1", "new", "measured"), op_id="fix")
    again = room.do(JO, FactCorrect("f1", "new", "measured"), op_id="fix")
    assert again.duplicate and again.seq == 2 and again.code is OutcomeCode.APPLIED
    assert room.state.last_seq == 3
    fact = room.state.fact("f1")
    assert fact is not None and len(fact.revisions) == 1


def test_skip_fills_the_sequence_for_non_memory_ops() -> None:
    """skip(seq) accepts the next seq, ignores passed ones and rejects a gap."""
    state = MemoryState("room-1")
    state.skip(1)
    state.skip(2)
    state.skip(1)
    assert state.last_seq == 2
    with pytest.raises(LocalProtocolError):
        state.skip(4)
    assert state.last_seq == 2


def test_outcome_of_answers_once_the_op_is_sequenced() -> None:
    """outcome_of is None for an op not applied yet, then the op's recorded outcome."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "fix it"))
    assert room.state.outcome_of("claim-1") is None
    room.do(JO, TaskClaim("t1"), op_id="claim-1")
    outcome = room.state.outcome_of("claim-1")
    assert outcome is not None and outcome.claim_answer == "won" and outcome.winner == JO


# --- facts -------------------------------------------------------------------------------------


def test_fact_age_counts_from_the_add() -> None:
    """A new fact's age is now minus the time it was added, never negative."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x", ("api",)), ts=T0)
    fact = room.state.fact("f1")
    assert fact is not None
    assert fact.author == MARIE and fact.text_by == MARIE and fact.tags == ("api",)
    assert fact.age_s(T0 + 90.0) == 90.0
    assert fact.age_s(T0 - 5.0) == 0.0


def test_adding_a_taken_fact_id_keeps_the_first() -> None:
    """The first add of an id in log order stands; a later one reports ALREADY_EXISTS."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "first"))
    outcome = room.do(JO, FactAdd("f1", "second"))
    assert outcome.code is OutcomeCode.ALREADY_EXISTS
    fact = room.state.fact("f1")
    assert fact is not None and fact.text == "first" and fact.author == MARIE


def test_confirm_adds_the_confirmer_and_resets_the_age() -> None:
    """Confirming lists the confirmer once and makes the fact as young as the confirmation."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"), ts=T0)
    assert room.do(JO, FactConfirm("f1"), ts=T0 + 3 * DAY).code is OutcomeCode.APPLIED
    room.do(KIM, FactConfirm("f1"), ts=T0 + 4 * DAY)
    room.do(JO, FactConfirm("f1"), ts=T0 + 5 * DAY)
    fact = room.state.fact("f1")
    assert fact is not None
    assert [(c.by, c.at) for c in fact.confirmations] == [(JO, T0 + 5 * DAY), (KIM, T0 + 4 * DAY)]
    assert fact.age_s(T0 + 6 * DAY) == DAY


def test_a_confirmation_with_an_older_clock_does_not_age_the_fact() -> None:
    """last_affirmed is the latest time anyone stood behind it, whatever the log order."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"), ts=T0 + DAY)
    room.do(JO, FactConfirm("f1"), ts=T0)
    fact = room.state.fact("f1")
    assert fact is not None and fact.last_affirmed == T0 + DAY


def test_the_author_confirming_refreshes_the_age_without_listing_them() -> None:
    """The person behind the text confirming again only resets the age."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"), ts=T0)
    room.do(MARIE, FactConfirm("f1"), ts=T0 + DAY)
    fact = room.state.fact("f1")
    assert fact is not None and fact.confirmations == () and fact.last_affirmed == T0 + DAY


def test_correct_replaces_text_and_keeps_who_and_why_in_history() -> None:
    """A correction records the old text, who stood behind it, the corrector and the reason."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "chunks are 8KB"), ts=T0)
    room.do(KIM, FactConfirm("f1"), ts=T0 + DAY)
    outcome = room.do(JO, FactCorrect("f1", "chunks are 4KB", "read the firmware"), ts=T0 + 2 * DAY)
    assert outcome.code is OutcomeCode.APPLIED
    fact = room.state.fact("f1")
    assert fact is not None
    assert (fact.text, fact.text_by, fact.author, fact.confirmations) == (
        "chunks are 4KB",
        JO,
        MARIE,
        (),
    )
    [revision] = fact.revisions
    assert revision.previous_text == "chunks are 8KB" and revision.previous_by == MARIE
    assert [c.by for c in revision.previous_confirmations] == [KIM]
    assert (revision.corrected_by, revision.because, revision.at) == (
        JO,
        "read the firmware",
        T0 + 2 * DAY,
    )
    assert fact.age_s(T0 + 2 * DAY) == 0.0


def test_forget_marks_the_fact_forgotten_and_keeps_it() -> None:
    """A forgotten fact leaves the live list but stays recorded, with who forgot it."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"))
    room.do(MARIE, FactAdd("f2", "y"))
    assert room.do(JO, FactForget("f1"), ts=T0 + 1).code is OutcomeCode.APPLIED
    assert [f.fact_id for f in room.state.facts()] == ["f2"]
    assert [f.fact_id for f in room.state.facts(include_forgotten=True)] == ["f1", "f2"]
    fact = room.state.fact("f1")
    assert fact is not None and fact.forgotten is not None and fact.forgotten.by == JO


@pytest.mark.parametrize("op", [FactConfirm("f1"), FactCorrect("f1", "z", "r"), FactForget("f1")])
def test_a_forgotten_fact_stays_forgotten(op: MemoryOp) -> None:
    """Confirm, correct or forget on a forgotten fact reports FORGOTTEN and changes nothing."""
    room = Room()
    room.do(MARIE, FactAdd("f1", "x"))
    room.do(JO, FactForget("f1"))
    before = room.state.fact("f1")
    assert room.do(KIM, op).code is OutcomeCode.FORGOTTEN
    assert room.state.fact("f1") == before


@pytest.mark.parametrize(
    "op",
    [
        FactConfirm("nope"),
        FactCorrect("nope", "z", "r"),
        FactForget("nope"),
        TaskClaim("nope"),
        TaskRelease("nope"),
        TaskDone("nope"),
        TaskDrop("nope"),
    ],
)
def test_ops_on_unknown_ids_report_unknown_id(op: MemoryOp) -> None:
    """An op naming no known fact or task changes nothing and says so."""
    room = Room()
    outcome = room.do(JO, op)
    assert outcome.code is OutcomeCode.UNKNOWN_ID
    assert room.state.facts(include_forgotten=True) == []
    assert room.state.tasks(include_closed=True) == []


def test_facts_from_any_member_are_accepted_and_attributed() -> None:
    """The core takes any sequenced sender's fact (no direct channel needed) and names them."""
    room = Room()
    stranger = Person("dddd-dddd-dddd-dddd", "someone-in-the-room")
    room.do(stranger, FactAdd("f1", "x"))
    fact = room.state.fact("f1")
    assert fact is not None and fact.author == stranger


# --- tasks -------------------------------------------------------------------------------------


def test_the_first_claim_in_log_order_wins_and_later_claims_lose() -> None:
    """Claims are decided by sequence: one WON, the rest LOST naming the winner."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "fix the retry"))
    won = room.do(JO, TaskClaim("t1"))
    lost = room.do(KIM, TaskClaim("t1"))
    assert (won.code, won.winner, won.claim_answer) == (OutcomeCode.WON, JO, "won")
    assert (lost.code, lost.winner, lost.claim_answer) == (OutcomeCode.LOST, JO, "lost")
    task = room.state.task("t1")
    assert task is not None and task.state is TaskState.CLAIMED and task.claimer == JO


def test_claiming_your_own_task_again_still_wins() -> None:
    """A re-claim by the holder is WON and changes nothing."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    room.do(JO, TaskClaim("t1"), ts=T0)
    again = room.do(JO, TaskClaim("t1"), ts=T0 + 9)
    assert again.code is OutcomeCode.WON and again.winner == JO
    task = room.state.task("t1")
    assert task is not None and task.claimed_at == T0


def test_only_the_claimer_can_release() -> None:
    """Another member's release is NOT_CLAIMER and leaves the claim; the claimer's reopens it."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    room.do(JO, TaskClaim("t1"))
    refused = room.do(KIM, TaskRelease("t1"))
    assert (refused.code, refused.winner) == (OutcomeCode.NOT_CLAIMER, JO)
    task = room.state.task("t1")
    assert task is not None and task.claimer == JO
    assert room.do(JO, TaskRelease("t1")).code is OutcomeCode.APPLIED
    task = room.state.task("t1")
    assert task is not None and (task.state, task.claimer) == (TaskState.OPEN, None)
    assert room.do(KIM, TaskClaim("t1")).code is OutcomeCode.WON


def test_releasing_an_open_task_reports_not_claimed() -> None:
    """Nobody holds an open task, so there is nothing to release."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    assert room.do(MARIE, TaskRelease("t1")).code is OutcomeCode.NOT_CLAIMED


def test_done_by_the_claimer_closes_the_task_with_its_note() -> None:
    """The holder finishing a task makes it DONE with who, when and the note."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    room.do(JO, TaskClaim("t1"))
    assert room.do(KIM, TaskDone("t1", "mine")).code is OutcomeCode.NOT_CLAIMER
    assert room.do(JO, TaskDone("t1", "merged in #42"), ts=T0 + 7).code is OutcomeCode.APPLIED
    task = room.state.task("t1")
    assert task is not None
    assert (task.state, task.closed_by, task.closed_at, task.note, task.claimer) == (
        TaskState.DONE,
        JO,
        T0 + 7,
        "merged in #42",
        None,
    )


def test_anyone_may_finish_an_unclaimed_task() -> None:
    """Done on an open task is accepted from any member."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    assert room.do(KIM, TaskDone("t1")).code is OutcomeCode.APPLIED
    task = room.state.task("t1")
    assert task is not None and task.state is TaskState.DONE and task.closed_by == KIM


@pytest.mark.parametrize("op", [TaskClaim("t1"), TaskRelease("t1"), TaskDone("t1"), TaskDrop("t1")])
@pytest.mark.parametrize("closing", [TaskDone("t1"), TaskDrop("t1")])
def test_a_closed_task_stays_closed(op: MemoryOp, closing: MemoryOp) -> None:
    """After done or drop, every task op reports CLOSED and changes nothing."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    room.do(MARIE, closing)
    before = room.state.task("t1")
    outcome = room.do(JO, op)
    assert outcome.code is OutcomeCode.CLOSED
    assert room.state.task("t1") == before
    if isinstance(op, TaskClaim):
        assert outcome.claim_answer == "lost"


def test_drop_keeps_the_task_and_respects_a_claim() -> None:
    """Only the holder may drop a claimed task; a dropped task is kept, not deleted."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "x"))
    room.do(JO, TaskClaim("t1"))
    assert room.do(MARIE, TaskDrop("t1")).code is OutcomeCode.NOT_CLAIMER
    assert room.do(JO, TaskDrop("t1")).code is OutcomeCode.APPLIED
    assert room.state.tasks() == []
    [task] = room.state.tasks(include_closed=True)
    assert task.state is TaskState.DROPPED and task.closed_by == JO


def test_adding_a_taken_task_id_keeps_the_first() -> None:
    """The first TaskAdd of an id stands."""
    room = Room()
    room.do(MARIE, TaskAdd("t1", "first", for_=JO))
    assert room.do(KIM, TaskAdd("t1", "second")).code is OutcomeCode.ALREADY_EXISTS
    task = room.state.task("t1")
    assert task is not None and (task.text, task.for_, task.created_by) == ("first", JO, MARIE)


def test_decisions_are_recorded_in_log_order_once_per_id() -> None:
    """Decisions keep who and when; a repeated decision id is ALREADY_EXISTS."""
    room = Room()
    room.do(MARIE, DecisionMade("d2", "use trio", "structured concurrency", "crosstalk"), ts=T0)
    room.do(JO, DecisionMade("d1", "use attrs", "frozen models", "crosstalk"), ts=T0 + 1)
    dup = room.do(KIM, DecisionMade("d1", "other", "", "crosstalk"))
    assert dup.code is OutcomeCode.ALREADY_EXISTS
    decisions = room.state.decisions()
    assert [(d.decision_id, d.by, d.at, d.seq) for d in decisions] == [
        ("d2", MARIE, T0, 1),
        ("d1", JO, T0 + 1, 2),
    ]
