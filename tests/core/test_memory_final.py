"""Which outcomes a replica may report as final (``core.memory.final_on``): every outcome of a
whole memory; on a memory that gave ops up, only an add's. Exhaustive over the memory op union,
and the logs that show why the rest must wait (sim seeds 418, 437)."""

from __future__ import annotations

import typing

import pytest

from crosstalk.core.memory import MemoryState, final_on
from crosstalk.wire.memory import (
    DecisionMade,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    OpContext,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRelease,
)
from crosstalk.wire.reservations import ReleaseOp, RenewOp, ReserveOp
from tests.core.test_memory import JO, KIM, T0

# One op of every kind, and whether its outcome on a memory that gave ops up is final.
EVERY_OP: dict[type, tuple[MemoryOp, bool]] = {
    FactAdd: (FactAdd("f1", "text"), True),
    FactConfirm: (FactConfirm("f1"), False),
    FactCorrect: (FactCorrect("f1", "text", "because"), False),
    FactForget: (FactForget("f1"), False),
    TaskAdd: (TaskAdd("t1", "text"), True),
    TaskClaim: (TaskClaim("t1"), False),
    TaskRelease: (TaskRelease("t1"), False),
    TaskDone: (TaskDone("t1"), False),
    TaskDrop: (TaskDrop("t1"), False),
    DecisionMade: (DecisionMade("d1", "text", "why", "app"), True),
    ReserveOp: (ReserveOp("r0000000001", "app", ("src/**",)), False),
    RenewOp: (RenewOp("r0000000001"), False),
    ReleaseOp: (ReleaseOp(), False),
}


def test_the_table_names_every_memory_op() -> None:
    """A new kind of memory op must be placed in the table below (and so decided on)."""
    assert set(EVERY_OP) == set(typing.get_args(MemoryOp))


KINDS = sorted(EVERY_OP, key=lambda k: k.__name__)


@pytest.mark.parametrize("kind", KINDS, ids=[k.__name__ for k in KINDS])
@pytest.mark.parametrize("gave_ops_up", [False, True])
def test_an_outcome_is_final_on_a_whole_memory_and_only_an_adds_on_one_that_gave_ops_up(
    kind: type, gave_ops_up: bool
) -> None:
    """Whole: every outcome is final. Gave ops up: only an add's (decided by its fresh id)."""
    op, final_when_ops_given_up = EVERY_OP[kind]
    expected = final_when_ops_given_up if gave_ops_up else True
    assert final_on(op, gave_ops_up=gave_ops_up) is expected


def _apply(state: MemoryState, seq: int, who: Person, op: MemoryOp | None) -> OutcomeCode | None:
    if op is None:
        state.skip(seq)
        return None
    ctx = OpContext(seq=seq, op_id=f"op-{seq}", sender=who.fingerprint, sender_label=who.label,
                    ts=T0 + seq, relay_ts=T0 + seq)
    return state.apply(op, ctx).code


def _decided_last(log: list[tuple[Person, MemoryOp]], given_up: set[int]) -> OutcomeCode | None:
    """The outcome of the log's last op on a memory that gave the seqs ``given_up`` up."""
    state = MemoryState("room")
    code = None
    for seq, (who, op) in enumerate(log, start=1):
        code = _apply(state, seq, who, None if seq in given_up else op)
    return code


@pytest.mark.parametrize(
    ("log", "whole", "gave_up"),
    [
        # jo's claim given up: kim's later claim wins there, and loses on the whole log.
        ([(JO, TaskAdd("t1", "x")), (JO, TaskClaim("t1")), (KIM, TaskClaim("t1"))],
         OutcomeCode.LOST, OutcomeCode.WON),
        # jo's reserve given up: kim's overlapping one is granted there, refused on the whole log.
        ([(JO, ReserveOp("r0000000001", "app", ("src/**",))),
          (KIM, ReserveOp("r0000000002", "app", ("src/auth/**",)))],
         OutcomeCode.REFUSED, OutcomeCode.APPLIED),
    ],
    ids=["claim", "reserve"],
)
def test_a_memory_that_gave_ops_up_decides_a_later_op_otherwise(
    log: list[tuple[Person, MemoryOp]], whole: OutcomeCode, gave_up: OutcomeCode
) -> None:
    """Why those outcomes are provisional: the same op, decided without the ops given up."""
    assert _decided_last(log, given_up=set()) is whole
    assert _decided_last(log, given_up={len(log) - 1}) is gave_up
    assert not final_on(log[-1][1], gave_ops_up=True)
