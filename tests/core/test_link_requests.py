"""The relay link's requests machine: held for READY, matched to replies, timed out."""

from __future__ import annotations

import math

import pytest

from crosstalk.core.link.common import LEAVE_FLUSH, ReqNumbers
from crosstalk.core.link.events import ReplyArrived, RequestFailed
from crosstalk.core.link.requests import Requests
from crosstalk.errors import LocalProtocolError, RelayUnreachable, SlotNotFound
from crosstalk.wire import relay as w
from tests.core.link_helpers import URL


def requests() -> Requests:
    return Requests(url=URL, reqs=ReqNumbers())


def test_held_requests_go_in_order_with_fresh_reqs() -> None:
    """The caller's req is replaced; each request takes the next number of the link's counter."""
    r = requests()
    r.add(w.ListRooms(999), "a", now=0.0, timeout=5.0)
    r.add(w.SlotOpen(999), "b", now=0.0, timeout=5.0)
    assert r.send_held(0.0) == [w.ListRooms(1), w.SlotOpen(2)]
    assert r.send_held(0.0) == []
    assert r.owns(1) and r.owns(2) and not r.owns(3)
    assert r.open == 2


def test_a_reply_is_matched_to_its_request_by_req() -> None:
    """The reply comes back with the caller's token and the frame as sent."""
    r = requests()
    r.add(w.SlotOpen(0), "tok", now=0.0, timeout=5.0)
    [sent] = r.send_held(0.0)
    reply = w.Slot(sent.req, "1234", 900.0)
    answered = r.answered(sent.req, reply)
    assert answered.sent == sent and answered.event == ReplyArrived("tok", reply)
    assert not r.owns(sent.req) and r.open == 0


def test_an_error_reply_becomes_our_error_with_the_same_code() -> None:
    """error slot_not_found answers the request with SlotNotFound."""
    r = requests()
    r.add(w.SlotJoin(0, "0001"), "tok", now=0.0, timeout=5.0)
    [sent] = r.send_held(0.0)
    event = r.answered(sent.req, w.Error(sent.req, "slot_not_found", "no slot")).event
    assert isinstance(event, RequestFailed) and isinstance(event.error, SlotNotFound)
    assert "no slot" in event.error.message


def test_a_held_request_fails_at_its_deadline_naming_the_last_error() -> None:
    """Not READY by the deadline: RelayUnreachable exactly then, not a moment before."""
    r = requests()
    r.add(w.ListRooms(0), "tok", now=1.0, timeout=5.0)
    assert r.next_deadline() == 6.0
    assert r.expire(5.9, "connection refused") == []
    [event] = r.expire(6.0, "connection refused")
    assert event.token == "tok" and isinstance(event.error, RelayUnreachable)
    assert "connection refused" in event.error.message
    assert r.next_deadline() == math.inf


def test_a_sent_request_fails_at_its_deadline() -> None:
    """No reply by the deadline: RelayUnreachable saying how long we waited."""
    r = requests()
    r.add(w.ListRooms(0), "tok", now=0.0, timeout=2.0)
    r.send_held(0.0)
    [event] = r.expire(2.0, None)
    assert "did not answer within 2 s" in event.error.message
    assert r.open == 0


def test_a_dropped_connection_fails_sent_requests_and_keeps_held_ones() -> None:
    """Pending requests fail at once; held ones keep waiting for the next READY."""
    r = requests()
    r.add(w.ListRooms(0), "sent", now=0.0, timeout=5.0)
    r.send_held(0.0)
    r.add(w.ListRooms(0), "held", now=0.0, timeout=5.0)
    [failed] = r.lost("reset by peer")
    assert failed.token == "sent" and "reset by peer" in failed.error.message
    assert [f.req for f in r.send_held(0.0)] == [2]


def test_abandoning_answers_held_and_sent_requests() -> None:
    """The link going away answers every open request and leaves nothing timed."""
    r = requests()
    r.add(w.ListRooms(0), "sent", now=0.0, timeout=5.0)
    r.send_held(0.0)
    r.add(w.ListRooms(0), "held", now=0.0, timeout=5.0)
    failed = r.abandon("stopping")
    assert [f.token for f in failed] == ["held", "sent"]
    assert all("stopping" in f.error.message for f in failed)
    assert r.open == 0 and r.next_deadline() == math.inf


@pytest.mark.parametrize(
    "frame",
    [w.Post(0, "r", "o", b""), w.Resume(0, {}), w.Ack("r", 1)],
    ids=["post", "resume", "ack"],
)
def test_only_request_frames_may_be_requested(frame: w.ClientFrame) -> None:
    """post, resume and ack have their own machines; requesting them is our bug."""
    with pytest.raises(LocalProtocolError):
        requests().add(frame, "tok", now=0.0, timeout=1.0)  # type: ignore[arg-type]


def test_a_leave_waits_for_its_room_s_posts_then_goes_anyway() -> None:
    """While the outbox holds a post for the room, a leave stays held (other requests, and
    leaves of other rooms, go); it goes once the room's posts are taken, or when its wait,
    which starts at the first READY, runs out: leaving never hangs on a post."""
    r = requests()
    r.add(w.Leave(0, "r1"), "leave", now=0.0, timeout=20.0)
    r.add(w.Leave(0, "r2"), "other", now=0.0, timeout=20.0)
    r.add(w.ListRooms(0), "list", now=0.0, timeout=20.0)
    assert r.send_held(8.0, {"r1"}) == [w.Leave(1, "r2"), w.ListRooms(2)]
    assert r.next_deadline() == 8.0 + LEAVE_FLUSH  # the wait started at 8, not when added
    assert r.send_held(8.0 + LEAVE_FLUSH - 0.001, {"r1"}) == []
    assert r.send_held(8.0 + LEAVE_FLUSH, {"r1"}) == [w.Leave(3, "r1")]
    r.add(w.Leave(0, "r3"), "again", now=20.0, timeout=20.0)
    assert r.send_held(20.0, {"r3"}) == []
    assert r.send_held(20.5, set()) == [w.Leave(4, "r3")]  # its posts were taken


def test_a_leave_s_wait_leaves_half_its_time_for_the_answer() -> None:
    """Near its deadline the wait is cut to half the time left, so the relay can still answer."""
    r = requests()
    r.add(w.Leave(0, "r1"), "leave", now=0.0, timeout=6.0)
    assert r.send_held(4.0, {"r1"}) == []
    assert r.next_deadline() == 5.0
    assert r.send_held(5.0, {"r1"}) == [w.Leave(1, "r1")]


def test_a_dropped_link_leaves_no_past_wait_behind() -> None:
    """A leave waiting for its posts when the link drops times nothing until the next READY."""
    r = requests()
    r.add(w.Leave(0, "r1"), "leave", now=0.0, timeout=20.0)
    r.send_held(0.0, {"r1"})
    r.lost("reset")
    assert r.next_deadline() == 20.0
