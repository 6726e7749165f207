"""Convergence: replicas that apply one room log, however delivered, agree hash for hash."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.memory import MemoryState, canonical_bytes
from crosstalk.wire.converter import structure_remote
from crosstalk.wire.memory import (
    DecisionMade,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemoryOp,
    MemorySnapshot,
    OutcomeCode,
    Person,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRelease,
    TaskState,
)
from tests.core.test_memory import JO, KIM, MARIE, T0, Log

PEOPLE = [MARIE, JO, KIM]
FACT_IDS = st.sampled_from(["f1", "f2", "f3"])
TASK_IDS = st.sampled_from(["t1", "t2"])
WORDS = st.sampled_from(["a", "b", "snake_case", "4KB"])

OPS: st.SearchStrategy[MemoryOp | None] = st.one_of(
    st.builds(FactAdd, FACT_IDS, WORDS, st.sampled_from([(), ("repo",), ("a", "b")])),
    st.builds(FactConfirm, FACT_IDS),
    st.builds(FactCorrect, FACT_IDS, WORDS, WORDS),
    st.builds(FactForget, FACT_IDS),
    st.builds(TaskAdd, TASK_IDS, WORDS, st.sampled_from([None, *PEOPLE])),
    st.builds(TaskClaim, TASK_IDS),
    st.builds(TaskRelease, TASK_IDS),
    st.builds(TaskDone, TASK_IDS, WORDS),
    st.builds(TaskDrop, TASK_IDS),
    st.builds(DecisionMade, st.sampled_from(["d1", "d2"]), WORDS, WORDS, WORDS),
    st.none(),  # a message or membership op: not memory, but it takes a seq
)


@st.composite
def room_logs(draw: st.DrawFn) -> Log:
    """Each person writes their own ops; the relay interleaves them and may sequence a retry."""
    queues = {p: draw(st.lists(OPS, max_size=12)) for p in PEOPLE}
    log = Log()
    sent: list[tuple[Person, MemoryOp, float, str]] = []
    while any(queues.values()):
        who = draw(st.sampled_from([p for p in PEOPLE if queues[p]]))
        op = queues[who].pop(0)
        ts = T0 + draw(st.integers(0, 10)) * 3600.0  # senders' clocks disagree
        if op is not None and sent and draw(st.integers(0, 5)) == 0:
            retry = draw(st.sampled_from(sent))  # a retried send, sequenced a second time
            log.add(retry[0], retry[1], ts=retry[2], op_id=retry[3])
        ctx = log.add(who, op, ts=ts)
        if op is not None:
            sent.append((who, op, ts, ctx.op_id))
    return log


def replay(log: Log) -> MemoryState:
    state = MemoryState("room-1")
    log.feed(state)
    return state


@given(log=room_logs(), data=st.data())
def test_replicas_of_one_log_converge(log: Log, data: st.DataObject) -> None:
    """Full replay, redelivery and snapshot catch-up at any point all give one hash."""
    reference = replay(log).state_hash()
    assert replay(log).state_hash() == reference

    redelivered = MemoryState("room-1")
    for index in range(len(log.entries)):
        log.feed(redelivered, index, index + 1)
        if data.draw(st.booleans()):
            back = data.draw(st.integers(0, index))
            log.feed(redelivered, back, index + 1)  # at-least-once: old ops come again
    assert redelivered.state_hash() == reference

    cut = data.draw(st.integers(0, len(log.entries)))
    donor = MemoryState("room-1")
    log.feed(donor, 0, cut)
    wire = json.loads(canonical_bytes(donor.snapshot()))
    caught_up = MemoryState.from_snapshot(structure_remote(wire, MemorySnapshot))
    log.feed(caught_up, cut)
    assert caught_up.state_hash() == reference


@given(log=room_logs())
def test_claimed_tasks_always_name_their_claimer(log: Log) -> None:
    """Whatever the log, a task has a claimer exactly when it is CLAIMED."""
    state = replay(log)
    for task in state.tasks(include_closed=True):
        assert (task.state is TaskState.CLAIMED) == (task.claimer is not None)


@given(order=st.permutations(PEOPLE), data=st.data())
def test_concurrent_claims_have_exactly_one_winner(
    order: list[Person], data: st.DataObject
) -> None:
    """Several people claim one open task at once: one WON (the first in log order) everywhere."""
    log = Log()
    log.add(MARIE, TaskAdd("t1", "fix the retry"))
    for person in order:
        log.add(person, TaskClaim("t1"), op_id=f"claim-{person.label}")
    replicas = [MemoryState("room-1") for _ in range(3)]
    for replica in replicas:
        cut = data.draw(st.integers(1, len(log.entries)))
        log.feed(replica, 0, cut)
        log.feed(replica, 0, cut)  # redelivered
        log.feed(replica, cut)
    for replica in replicas:
        outcomes = [replica.outcome_of(f"claim-{p.label}") for p in PEOPLE]
        winners = [o for o in outcomes if o is not None and o.code is OutcomeCode.WON]
        assert len(winners) == 1 and winners[0].winner == order[0]
        assert all(o is not None and o.winner == order[0] for o in outcomes)
        task = replica.task("t1")
        assert task is not None and task.claimer == order[0]
    assert len({r.state_hash() for r in replicas}) == 1
