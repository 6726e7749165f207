"""Memory wire models: tagged ops and snapshots round-trip; malformed peer data is one error."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, structure_remote, unstructure
from crosstalk.wire.memory import (
    OP_TAGS,
    Confirmation,
    DecisionMade,
    DecisionRecord,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    FactRecord,
    Forgetting,
    MemoryOp,
    MemorySnapshot,
    OpContext,
    Outcome,
    OutcomeCode,
    Person,
    Revision,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskDrop,
    TaskRecord,
    TaskRelease,
    TaskState,
    parse_memory_op,
)

TEXT = st.text(max_size=20)
TIME = st.floats(allow_nan=False, allow_infinity=False)
SEQ = st.integers(1, 2**53)
PERSON = st.builds(Person, TEXT, TEXT)
TAGS = st.lists(TEXT, max_size=3).map(tuple)

OP = st.one_of(
    st.builds(FactAdd, TEXT, TEXT, TAGS),
    st.builds(FactConfirm, TEXT),
    st.builds(FactCorrect, TEXT, TEXT, TEXT),
    st.builds(FactForget, TEXT),
    st.builds(TaskAdd, TEXT, TEXT, st.none() | PERSON),
    st.builds(TaskClaim, TEXT),
    st.builds(TaskRelease, TEXT),
    st.builds(TaskDone, TEXT, TEXT),
    st.builds(TaskDrop, TEXT),
    st.builds(DecisionMade, TEXT, TEXT, TEXT, TEXT),
)
CONFIRMATION = st.builds(Confirmation, PERSON, TIME)
FACT = st.builds(
    FactRecord,
    fact_id=TEXT,
    text=TEXT,
    tags=TAGS,
    author=PERSON,
    added_at=TIME,
    added_seq=SEQ,
    text_by=PERSON,
    confirmations=st.lists(CONFIRMATION, max_size=2).map(tuple),
    revisions=st.lists(
        st.builds(
            Revision,
            TEXT,
            PERSON,
            st.lists(CONFIRMATION, max_size=2).map(tuple),
            PERSON,
            TEXT,
            TIME,
            SEQ,
        ),
        max_size=2,
    ).map(tuple),
    forgotten=st.none() | st.builds(Forgetting, PERSON, TIME, SEQ),
    last_affirmed=TIME,
)
TASK = st.builds(
    TaskRecord,
    task_id=TEXT,
    text=TEXT,
    for_=st.none() | PERSON,
    created_by=PERSON,
    added_at=TIME,
    added_seq=SEQ,
    state=st.sampled_from(TaskState),
    claimer=st.none() | PERSON,
    claimed_at=st.none() | TIME,
    closed_by=st.none() | PERSON,
    closed_at=st.none() | TIME,
    note=TEXT,
)
SNAPSHOT = st.builds(
    MemorySnapshot,
    room_id=TEXT,
    last_seq=st.integers(0, 2**53),
    facts=st.lists(FACT, max_size=2).map(tuple),
    tasks=st.lists(TASK, max_size=2).map(tuple),
    decisions=st.lists(
        st.builds(DecisionRecord, TEXT, TEXT, TEXT, TEXT, PERSON, TIME, SEQ), max_size=2
    ).map(tuple),
    outcomes=st.lists(
        st.builds(Outcome, TEXT, SEQ, st.sampled_from(OutcomeCode), st.none() | PERSON),
        max_size=2,
    ).map(tuple),
)


@given(op=OP)
def test_every_op_round_trips_through_json_with_its_tag(op: MemoryOp) -> None:
    """Unstructure, JSON, parse: the same op comes back, tagged by its kind under "op"."""
    data = json.loads(json.dumps(converter.unstructure(op, MemoryOp)))
    assert data["op"] == OP_TAGS[type(op)]
    assert parse_memory_op(data) == op


@given(snapshot=SNAPSHOT)
def test_snapshots_round_trip_through_json(snapshot: MemorySnapshot) -> None:
    """A snapshot with every kind of record survives JSON unchanged."""
    data = json.loads(json.dumps(unstructure(snapshot)))
    assert structure_remote(data, MemorySnapshot) == snapshot


def test_task_add_uses_for_on_the_wire() -> None:
    """The Python attribute for_ is the key "for" in JSON, in ops and in records."""
    op = TaskAdd("t1", "x", Person("aaaa", "jo"))
    assert converter.unstructure(op, MemoryOp) == {
        "op": "task_add",
        "task_id": "t1",
        "text": "x",
        "for": {"fingerprint": "aaaa", "label": "jo"},
    }


def test_every_op_kind_has_a_distinct_tag() -> None:
    """Thirteen op kinds (ten of memory, three of reservations), thirteen different tags."""
    assert len(set(OP_TAGS.values())) == len(OP_TAGS) == 13


@pytest.mark.parametrize(
    "data",
    [
        {"op": "fact_delete", "fact_id": "f1"},
        {"fact_id": "f1"},
        {"op": "fact_add", "text": "no id"},
        {"op": "task_add", "task_id": "t1", "text": "x", "for": {"label": "no fingerprint"}},
        "fact_add",
        None,
        [],
    ],
)
def test_malformed_ops_raise_one_remote_protocol_error(data: object) -> None:
    """Any malformed op from a peer becomes a RemoteProtocolError, nothing else."""
    with pytest.raises(RemoteProtocolError, match="malformed memory op"):
        parse_memory_op(data)


@pytest.mark.parametrize("ts", [math.nan, math.inf, -math.inf])
def test_op_context_refuses_a_non_finite_time(ts: float) -> None:
    """A NaN or infinite timestamp would poison ages and the canonical JSON: refused."""
    with pytest.raises(ValueError, match="finite"):
        OpContext(seq=1, op_id="o", sender="s", sender_label="l", ts=ts)


def test_op_context_refuses_seq_zero() -> None:
    """Relay sequence numbers start at 1."""
    with pytest.raises(ValueError, match="at least 1"):
        OpContext(seq=0, op_id="o", sender="s", sender_label="l", ts=0.0)


def test_op_context_stores_time_as_float() -> None:
    """An integer time is converted, so hashes do not depend on how it was written."""
    ctx = OpContext(seq=1, op_id="o", sender="s", sender_label="l", ts=5)
    assert type(ctx.ts) is float and ctx.person == Person("s", "l")
