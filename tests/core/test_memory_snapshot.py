"""Snapshots and the canonical hash: catch-up from a snapshot equals a full replay."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from crosstalk.core.memory import MemoryState, canonical_bytes
from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import structure_remote
from crosstalk.wire.memory import (
    DecisionMade,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    MemorySnapshot,
    OutcomeCode,
    TaskAdd,
    TaskClaim,
    TaskDone,
    TaskRelease,
)
from tests.core.test_memory import DAY, JO, KIM, MARIE, T0, Log


def scripted_log() -> Log:
    """A log exercising every kind of op, with non-memory ops and a retried send in it."""
    log = Log()
    log.add(MARIE, FactAdd("f1", "uploads chunk at 8KB", ("palpable-fw",)), ts=T0)
    log.add(JO, FactAdd("f2", "API returns snake_case"), ts=T0 + 1)
    log.add(KIM, None)
    log.add(JO, FactConfirm("f1"), ts=T0 + DAY)
    log.add(MARIE, TaskAdd("t1", "fix the retry", for_=JO), ts=T0 + DAY)
    log.add(JO, TaskClaim("t1"), ts=T0 + DAY, op_id="claim-jo")
    log.add(KIM, TaskClaim("t1"), ts=T0 + DAY, op_id="claim-kim")
    log.add(KIM, FactCorrect("f1", "uploads chunk at 4KB", "read the code"), ts=T0 + 2 * DAY)
    log.add(MARIE, FactForget("f2"), ts=T0 + 2 * DAY)
    log.add(KIM, TaskClaim("t1"), ts=T0 + DAY, op_id="claim-kim")  # the relay sequenced a retry
    log.add(JO, TaskRelease("t1"), ts=T0 + 3 * DAY)
    log.add(KIM, TaskClaim("t1"), ts=T0 + 3 * DAY, op_id="claim-kim-2")
    log.add(KIM, TaskDone("t1", "done in #7"), ts=T0 + 4 * DAY)
    log.add(MARIE, DecisionMade("d1", "4KB chunks", "flash pages", "palpable-fw"), ts=T0 + 4 * DAY)
    log.add(JO, None)
    return log


def through_the_wire(snapshot: MemorySnapshot) -> MemorySnapshot:
    """Encode a snapshot canonically and parse it back, as a catching-up member would."""
    return structure_remote(json.loads(canonical_bytes(snapshot)), MemorySnapshot)


def full_replay(log: Log) -> MemoryState:
    state = MemoryState("room-1")
    log.feed(state)
    return state


@pytest.mark.parametrize("cut", range(len(scripted_log().entries) + 1))
def test_snapshot_plus_tail_equals_full_replay(cut: int) -> None:
    """A replica restored from a snapshot at any seq, then fed the rest, has the same hash."""
    log = scripted_log()
    donor = MemoryState("room-1")
    log.feed(donor, 0, cut)
    restored = MemoryState.from_snapshot(through_the_wire(donor.snapshot()))
    assert restored.last_seq == cut
    log.feed(restored, cut)
    assert restored.state_hash() == full_replay(log).state_hash()


def test_correction_and_forget_after_the_snapshot_are_reflected() -> None:
    """A member who catches up by snapshot sees later corrections and forgets (no stale fact)."""
    log = Log()
    log.add(MARIE, FactAdd("f1", "old text"))
    log.add(MARIE, FactAdd("f2", "soon forgotten"))
    donor = MemoryState("room-1")
    log.feed(donor)
    snapshot = through_the_wire(donor.snapshot())
    log.add(JO, FactCorrect("f1", "new text", "it changed"))
    log.add(JO, FactForget("f2"))
    away = MemoryState.from_snapshot(snapshot)
    log.feed(away, snapshot.last_seq)
    assert [(f.fact_id, f.text) for f in away.facts()] == [("f1", "new text")]
    assert away.state_hash() == full_replay(log).state_hash()


def test_claim_outcomes_survive_a_snapshot() -> None:
    """A restored replica still answers won/lost for claims sequenced before the snapshot."""
    log = scripted_log()
    restored = MemoryState.from_snapshot(through_the_wire(full_replay(log).snapshot()))
    jo, kim = restored.outcome_of("claim-jo"), restored.outcome_of("claim-kim")
    assert jo is not None and (jo.code, jo.winner) == (OutcomeCode.WON, JO)
    assert kim is not None and (kim.code, kim.winner) == (OutcomeCode.LOST, JO)


def test_an_op_from_before_the_snapshot_arriving_again_is_a_duplicate() -> None:
    """Op ids applied before a snapshot are remembered, so a late retry has no effect."""
    log = Log()
    log.add(MARIE, FactAdd("f1", "x"), op_id="add")
    log.add(JO, FactCorrect("f1", "y", "because"), op_id="fix")
    snapshot = through_the_wire(full_replay(log).snapshot())
    log.add(JO, FactCorrect("f1", "y", "because"), op_id="fix")
    restored = MemoryState.from_snapshot(snapshot)
    [outcome] = log.feed(restored, snapshot.last_seq)
    assert outcome.duplicate
    fact = restored.fact("f1")
    assert fact is not None and len(fact.revisions) == 1
    assert restored.state_hash() == full_replay(log).state_hash()


def test_canonical_bytes_are_sorted_compact_utf8_json() -> None:
    """The encoding to sign is pinned: sorted keys, no spaces, non-ASCII kept as UTF-8."""
    log = Log()
    log.add(MARIE, FactAdd("f1", "café"), ts=T0, op_id="o1")
    state = full_replay(log)
    fact = (
        '{"added_at":1800000000.0,"added_seq":1,'
        '"author":{"fingerprint":"aaaa-aaaa-aaaa-aaaa","label":"marie"},'
        '"confirmations":[],"fact_id":"f1","forgotten":null,"last_affirmed":1800000000.0,'
        '"revisions":[],"tags":[],"text":"café",'
        '"text_by":{"fingerprint":"aaaa-aaaa-aaaa-aaaa","label":"marie"}}'
    )
    expected = (
        '{"decisions":[],"facts":[' + fact + '],"last_seq":1,'
        '"outcomes":[{"code":"applied","duplicate":false,"op_id":"o1","seq":1,"winner":null}],'
        '"room_id":"room-1","tasks":[],"version":1}'
    )
    assert canonical_bytes(state.snapshot()) == expected.encode("utf-8")


def test_the_hash_tells_replicas_apart() -> None:
    """Replicas that disagree on anything have different hashes."""
    log = scripted_log()
    one, other = full_replay(log), full_replay(log)
    assert one.state_hash() == other.state_hash()
    other.skip(other.last_seq + 1)
    assert one.state_hash() != other.state_hash()


def test_integer_timestamps_hash_like_floats() -> None:
    """A context built with an int time is converted, so replicas hash the same either way."""
    a, b = Log(), Log()
    a.add(MARIE, FactAdd("f1", "x"), ts=1_800_000_000)
    b.add(MARIE, FactAdd("f1", "x"), ts=1_800_000_000.0)
    assert full_replay(a).state_hash() == full_replay(b).state_hash()


def _snapshot_with(**changes: Any) -> MemorySnapshot:
    return attrs.evolve(full_replay(scripted_log()).snapshot(), **changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"version": 2}, "version 2"),
        ({"last_seq": 3}, "outcome after its last_seq"),
        ({"last_seq": -1}, "negative"),
    ],
)
def test_a_contradictory_snapshot_is_refused(changes: dict[str, Any], message: str) -> None:
    """from_snapshot rejects a snapshot that cannot be right, with RemoteProtocolError."""
    with pytest.raises(RemoteProtocolError, match=message):
        MemoryState.from_snapshot(_snapshot_with(**changes))


@pytest.mark.parametrize("field", ["facts", "tasks", "decisions", "outcomes"])
def test_a_snapshot_listing_an_id_twice_is_refused(field: str) -> None:
    """Duplicate ids in any list make the snapshot invalid."""
    good = full_replay(scripted_log()).snapshot()
    items = getattr(good, field)
    changes: dict[str, Any] = {field: (*items, items[0])}
    with pytest.raises(RemoteProtocolError, match="twice"):
        MemoryState.from_snapshot(attrs.evolve(good, **changes))
