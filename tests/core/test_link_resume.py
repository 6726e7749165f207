"""The relay link's resume machine: cursors, resume, inbound ops and acknowledgements."""

from __future__ import annotations

import pytest

from crosstalk.core.link.events import OpArrived, RoomJoined, RoomLeft
from crosstalk.core.link.resume import Resume, ResumeState
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire import relay as w
from tests.core.link_helpers import op


def state(r: Resume) -> ResumeState:
    """Read through a call so mypy does not pin the state between inputs."""
    return r.state


def test_resume_carries_every_cursor_and_owns_its_req() -> None:
    """start sends resume with the cursors under the given req; only that req is its answer."""
    r = Resume({"r1": 4, "r2": 0})
    assert r.start(7) == w.Resume(7, {"r1": 4, "r2": 0})
    assert r.owns(7) and not r.owns(8)
    assert r.resumed(w.Resumed(7, [], [])) == []
    assert state(r) is ResumeState.DONE and not r.owns(7)


def test_rooms_the_relay_calls_missing_lose_their_cursors() -> None:
    """resumed with missing rooms yields RoomLeft for those we had, and drops them."""
    r = Resume({"a": 1, "b": 2})
    r.start(1)
    assert r.resumed(w.Resumed(1, [], ["a", "zzz"])) == [RoomLeft("a")]
    assert r.cursors == {"b": 2}


@pytest.mark.parametrize(
    ("answer", "match"),
    [(w.Error(1, "bad_frame", "cursors"), "bad_frame"), (w.Ok(1), "answered resume with ok")],
)
def test_a_refused_or_odd_resume_answer_is_a_protocol_error(
    answer: w.RelayFrame, match: str
) -> None:
    """An error or anything but resumed in answer to resume is the relay's fault."""
    r = Resume({})
    r.start(1)
    with pytest.raises(RemoteProtocolError, match=match):
        r.resumed(answer)


def test_an_op_past_the_cursor_is_reported_and_acknowledged_only_once_committed() -> None:
    """OpArrived first; the ack comes from committed, which moves the cursor."""
    r = Resume({"r1": 2})
    assert r.op_received(op(3)) == OpArrived(op(3))
    assert r.committed("r1", 3) == w.Ack("r1", 3)
    assert r.cursors == {"r1": 3}


def test_an_op_at_or_below_the_cursor_is_acknowledged_again_and_not_reported() -> None:
    """Re-delivery of a committed op is acked at once."""
    r = Resume({"r1": 5})
    assert r.op_received(op(5)) == w.Ack("r1", 5)
    assert r.op_received(op(4)) == w.Ack("r1", 4)


def test_a_replay_of_an_op_whose_commit_is_under_way_is_ignored() -> None:
    """Reported but not committed: a replay is neither reported again nor acknowledged."""
    r = Resume({"r1": 2})
    r.op_received(op(3))
    r.op_received(op(4))
    r.lost()
    r.start(9)
    assert r.op_received(op(3)) is None
    assert r.op_received(op(4)) is None
    assert r.op_received(op(5)) == OpArrived(op(5))


def test_cursors_never_move_back() -> None:
    """A commit of an older seq leaves a newer cursor where it is."""
    r = Resume({"r1": 7})
    r.committed("r1", 3)
    assert r.cursors == {"r1": 7}


def test_joining_gives_a_room_a_cursor_of_zero_once() -> None:
    """joined starts a cursor at 0; joining a room we have changes nothing."""
    r = Resume({"old": 3})
    assert r.joined("new") == RoomJoined("new")
    assert r.joined("old") is None
    assert r.cursors == {"old": 3, "new": 0}


def test_leaving_forgets_the_cursor_and_ops_on_their_way() -> None:
    """left drops the cursor (RoomLeft once) and what was reported, so a rejoin starts fresh."""
    r = Resume({"r1": 2})
    r.op_received(op(3))
    assert r.left("r1") == RoomLeft("r1")
    assert r.left("r1") is None
    r.joined("r1")
    assert r.op_received(op(3)) == OpArrived(op(3))


def test_start_twice_or_resumed_when_not_waiting_is_our_bug() -> None:
    """Inputs out of order park the machine in ERROR."""
    r = Resume({})
    with pytest.raises(LocalProtocolError):
        r.resumed(w.Resumed(1, [], []))
    assert state(r) is ResumeState.ERROR
    r2 = Resume({})
    r2.start(1)
    with pytest.raises(LocalProtocolError):
        r2.start(2)


def test_lost_returns_to_idle_from_every_state() -> None:
    """A dropped connection forgets the resume in flight; the next start sends a new one."""
    for answered in (False, True):
        r = Resume({"r1": 1})
        r.start(1)
        if answered:
            r.resumed(w.Resumed(1, [], []))
        r.lost()
        assert state(r) is ResumeState.IDLE and not r.owns(1)
        assert r.start(2) == w.Resume(2, {"r1": 1})
