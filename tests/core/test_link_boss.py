"""The relay link's boss: dialing and backoff, routing to its machines, drops, READY."""

from __future__ import annotations

import math

import pytest

from crosstalk.core.link import LinkBoss, LinkState, backoff_delay, post_retry_delay
from crosstalk.core.link.common import BACKOFF_CAP, OutboxItem, ReqNumbers, Resealed, next_state
from crosstalk.core.link.events import (
    Dial,
    Drop,
    LinkEvent,
    LinkLost,
    LinkReady,
    OpArrived,
    PostAccepted,
    PushArrived,
    RelayComplained,
    RelayKeySeen,
    ReplyArrived,
    RequestFailed,
    ResealWanted,
    RoomJoined,
    RoomLeft,
)
from crosstalk.errors import LocalProtocolError, RelayUnreachable
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import frame_body
from tests.core.link_helpers import (
    ME,
    OTHER_RELAY_PUB,
    RELAY_PUB,
    URL,
    challenge,
    item,
    op,
    ready,
)


def boss(**kwargs: object) -> LinkBoss:
    args: dict[str, object] = {"keys": ME, "device": "dev-1", "url": URL, "pinned_key": RELAY_PUB}
    args.update(kwargs)
    return LinkBoss(**args)  # type: ignore[arg-type]  # test helper forwarding keywords


def state(b: LinkBoss) -> LinkState:
    """Read through a call so mypy does not pin the state between inputs."""
    return b.state


def relay_says(b: LinkBoss, frame: w.RelayFrame, now: float = 0.0) -> None:
    b.frame_received(w.encode_frame(frame), now)


def sent(b: LinkBoss) -> list[w.ClientFrame]:
    return [w.decode_client_frame(text) for text in b.data_to_send()]


def connect(b: LinkBoss, now: float = 0.0) -> None:
    """Dial (the first time, or cutting a backoff short) and open the connection."""
    if b.last_error is None:
        b.start(now)
    else:
        b.retry_now(now)
    b.connected(now)


def to_resuming(b: LinkBoss, now: float = 0.0) -> w.Resume:
    """Connect and authenticate; return the resume ``b`` sends."""
    connect(b, now)
    relay_says(b, challenge(), now)
    relay_says(b, ready(), now)
    frames = sent(b)
    assert isinstance(frames[-1], w.Resume)
    return frames[-1]


def to_ready(b: LinkBoss, now: float = 0.0) -> list[w.ClientFrame]:
    """Drive ``b`` to READY; return what it sent after ``resumed``."""
    resume = to_resuming(b, now)
    relay_says(b, w.Resumed(resume.req, [], []), now)
    return sent(b)


def happened(b: LinkBoss) -> list[LinkEvent]:
    """The events, without the Dial orders."""
    return [e for e in b.events_received() if not isinstance(e, Dial)]


# --- delays ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempt", "fraction", "delay"),
    [(1, 0.0, 0.5), (1, 1.0, 1.0), (2, 0.5, 1.5), (3, 0.0, 2.0), (5, 1.0, 16.0),
     (6, 0.0, 15.0), (6, 1.0, 30.0), (7, 0.0, 15.0), (1000, 1.0, 30.0)],
)
def test_backoff_is_jittered_exponential_capped_at_30_s(
    attempt: int, fraction: float, delay: float
) -> None:
    """The delay is ceiling * (0.5 + fraction / 2) with the ceiling 1, 2, 4 … capped at 30 s."""
    assert backoff_delay(attempt, fraction) == delay


def test_backoff_stays_between_half_a_second_and_the_cap() -> None:
    """Across attempts and fractions the delay stays within [0.5, 30] seconds."""
    delays = [backoff_delay(a, f / 10) for a in range(1, 40) for f in range(11)]
    assert (min(delays), max(delays)) == (0.5, BACKOFF_CAP)


@pytest.mark.parametrize(("attempt", "fraction"), [(0, 0.5), (1, -0.1), (1, 1.5)])
def test_backoff_refuses_nonsense_inputs(attempt: int, fraction: float) -> None:
    """Attempt 0 or a fraction outside [0, 1] is our bug, not a delay."""
    with pytest.raises(LocalProtocolError):
        backoff_delay(attempt, fraction)


def test_post_retry_delay_doubles_to_the_cap() -> None:
    """A paused room waits 1, 2, 4, 8, 16, then 30 s for good."""
    assert [post_retry_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_req_numbers_are_never_reused_and_tables_refuse_unknown_inputs() -> None:
    """The counter only climbs; a transition table without the input raises our error."""
    reqs = ReqNumbers()
    assert [reqs.take() for _ in range(3)] == [1, 2, 3]
    with pytest.raises(LocalProtocolError, match="cannot take resumed while disconnected"):
        next_state({LinkState.DISCONNECTED: {}}, LinkState.DISCONNECTED, "resumed", "boss")


# --- dialing -------------------------------------------------------------------------------------


def test_start_dials_and_each_loss_schedules_the_next_dial_after_the_backoff() -> None:
    """Dial at once; after a failed attempt, Dial again exactly when the backoff ends."""
    b = boss()
    b.start(0.0)
    assert b.events_received() == [Dial()]
    assert state(b) is LinkState.CONNECTING
    b.connection_lost("refused", 0.0, fraction=1.0)
    assert b.events_received() == [LinkLost("refused", 1.0)]
    assert b.next_deadline() == 1.0
    b.tick(0.999)
    assert b.events_received() == [] and state(b) is LinkState.DISCONNECTED
    b.tick(1.0)
    assert b.events_received() == [Dial()]
    b.connection_lost("refused", 1.0, fraction=1.0)
    assert b.events_received() == [LinkLost("refused", 2.0)]


def test_retry_now_cuts_a_backoff_short() -> None:
    """While waiting out a backoff, RetryNow dials at that instant."""
    b = boss()
    b.start(0.0)
    b.events_received()
    b.connection_lost("refused", 0.0, fraction=1.0)
    b.retry_now(0.3)
    assert b.events_received() == [LinkLost("refused", 1.0), Dial()]
    assert state(b) is LinkState.CONNECTING


def test_retry_now_during_an_attempt_skips_the_backoff_after_it() -> None:
    """RetryNow while an attempt is under way: if that attempt fails, dial again at once."""
    b = boss()
    b.start(0.0)
    b.retry_now(0.0)
    assert b.events_received() == [Dial()]
    b.connection_lost("refused", 2.0, fraction=1.0)
    assert b.events_received() == [LinkLost("refused", 0.0)]
    b.tick(2.0)
    assert b.events_received() == [Dial()]
    b.connection_lost("refused", 2.0, fraction=1.0)
    assert b.events_received() == [LinkLost("refused", 2.0)]


def test_retry_now_while_ready_is_forgotten() -> None:
    """A RetryNow that finds the link READY does not shorten a later backoff."""
    b = boss()
    to_ready(b)
    b.retry_now(1.0)
    b.events_received()
    b.connection_lost("reset", 2.0, fraction=1.0)
    assert b.events_received() == [LinkLost("reset", 1.0)]


def test_failed_attempts_count_up_and_reset_once_ready() -> None:
    """Each lost attempt raises the backoff; reaching READY resets it."""
    b = boss()
    b.start(0.0)
    for n in range(1, 4):
        b.connection_lost("refused", 0.0, fraction=1.0)
        assert b.attempts == n
        b.retry_now(0.0)
    assert [e for e in b.events_received() if isinstance(e, LinkLost)][-1].retry_in == 4.0
    assert b.last_error == "refused"
    b.connected(0.0)
    relay_says(b, challenge())
    relay_says(b, ready())
    resume = sent(b)[-1]
    assert isinstance(resume, w.Resume)
    relay_says(b, w.Resumed(resume.req, [], []))
    assert b.attempts == 0


# --- handshake, resume and drops -------------------------------------------------------------


def test_handshake_then_resume_with_the_cursors_then_ready() -> None:
    """hello, then resume with every cursor, then LinkReady with what the relay said."""
    b = boss(cursors={"r1": 4, "r2": 0})
    connect(b)
    assert state(b) is LinkState.AUTHENTICATING
    relay_says(b, challenge())
    assert [type(f) for f in sent(b)] == [w.Hello]
    relay_says(b, ready())
    assert state(b) is LinkState.RESUMING
    [resume] = sent(b)
    assert isinstance(resume, w.Resume) and resume.cursors == {"r1": 4, "r2": 0}
    rooms = [w.ResumedRoom("r1", 1, 9)]
    relay_says(b, w.Resumed(resume.req, rooms, []))
    assert state(b) is LinkState.READY
    assert happened(b) == [LinkReady(RELAY_PUB, rooms, [])]


def test_first_use_pins_the_key_before_resuming() -> None:
    """With no pin, ready yields RelayKeySeen and resume waits for relay_key_pinned."""
    b = boss(pinned_key=None)
    connect(b)
    relay_says(b, challenge())
    sent(b)
    relay_says(b, ready())
    assert happened(b) == [RelayKeySeen(RELAY_PUB)]
    assert sent(b) == [] and b.relay_key is None
    b.relay_key_pinned(RELAY_PUB, 0.0)
    assert b.relay_key == RELAY_PUB
    assert [type(f) for f in sent(b)] == [w.Resume]


def test_a_pin_committed_after_the_connection_dropped_resumes_nothing() -> None:
    """The pin stands, but no resume goes out for a dead connection."""
    b = boss(pinned_key=None)
    connect(b)
    relay_says(b, challenge())
    relay_says(b, ready())
    b.connection_lost("gone", 0.0, fraction=0.0)
    b.data_to_send()
    b.relay_key_pinned(RELAY_PUB, 0.0)
    assert sent(b) == [] and b.relay_key == RELAY_PUB


def test_another_key_drops_the_connection_without_a_word_and_warns() -> None:
    """A mismatched key: Drop(refused_key) and nothing sent; the rest of it is ignored."""
    b = boss()
    connect(b)
    relay_says(b, challenge(OTHER_RELAY_PUB))
    [drop] = happened(b)
    assert isinstance(drop, Drop) and drop.refused_key and "will not talk to it" in drop.reason
    relay_says(b, ready())
    assert sent(b) == [] and happened(b) == []
    b.connection_lost(drop.reason, 0.0, fraction=0.0)
    assert happened(b) == [LinkLost(drop.reason, 0.5)]


@pytest.mark.parametrize(
    "frames",
    [["{not json"], [w.encode_frame(w.Error(None, "unauthenticated", "no"))]],
    ids=["garbage", "refused"],
)
def test_a_relay_breaking_the_protocol_is_dropped_with_the_reason(frames: list[str]) -> None:
    """A frame that breaks the protocol yields Drop with what was wrong, not an exception."""
    b = boss()
    connect(b)
    for text in frames:
        b.frame_received(text, 0.0)
    [drop] = happened(b)
    assert isinstance(drop, Drop) and not drop.refused_key and drop.reason


def test_handshake_frames_after_ready_and_a_refused_resume_drop_the_connection() -> None:
    """challenge after the handshake, or an error in answer to resume, is a protocol error."""
    b = boss()
    to_ready(b)
    b.events_received()
    relay_says(b, challenge())
    assert [type(e) for e in b.events_received()] == [Drop]
    b2 = boss()
    resume = to_resuming(b2)
    relay_says(b2, w.Error(resume.req, "bad_frame", "cursors"))
    [drop] = happened(b2)
    assert isinstance(drop, Drop) and "bad_frame" in drop.reason


def test_a_handshake_that_does_not_finish_in_time_is_dropped() -> None:
    """Connected at 1 s with a 10 s limit: Drop at 11 s exactly, once."""
    b = boss()
    b.start(0.0)
    b.connected(1.0)
    relay_says(b, challenge(), 1.0)
    assert b.next_deadline() == 11.0
    b.tick(10.9)
    assert happened(b) == []
    b.tick(11.0)
    [drop] = happened(b)
    assert isinstance(drop, Drop) and "within 10 s" in drop.reason
    b.tick(12.0)
    assert happened(b) == [] and b.next_deadline() == math.inf


def test_inputs_in_the_wrong_state_park_the_boss_in_error() -> None:
    """A frame while disconnected, or connected() twice, is our bug: ERROR."""
    b = boss()
    with pytest.raises(LocalProtocolError):
        b.frame_received(w.encode_frame(challenge()), 0.0)
    assert state(b) is LinkState.ERROR
    b2 = boss()
    connect(b2)
    with pytest.raises(LocalProtocolError):
        b2.connected(0.0)
    assert state(b2) is LinkState.ERROR


# --- routing: ops, pushes, replies ---------------------------------------------------------------


def test_an_op_is_acknowledged_only_after_it_is_committed() -> None:
    """A new op is reported; the ack goes out only from op_committed, which moves the cursor."""
    b = boss(cursors={"r1": 2})
    to_ready(b)
    b.events_received()
    relay_says(b, op(3))
    assert b.events_received() == [OpArrived(op(3))]
    assert sent(b) == []
    b.op_committed("r1", 3)
    assert sent(b) == [w.Ack("r1", 3)] and b.cursors == {"r1": 3}


def test_a_replayed_op_is_acknowledged_again_at_once() -> None:
    """Re-delivery of a committed op acks it and reports nothing."""
    b = boss(cursors={"r1": 5})
    to_ready(b)
    b.events_received()
    relay_says(b, op(5))
    assert b.events_received() == [] and sent(b) == [w.Ack("r1", 5)]


def test_a_commit_after_the_connection_dropped_is_carried_by_the_next_resume() -> None:
    """op_committed while disconnected sends nothing; the next resume has the cursor."""
    b = boss(cursors={"r1": 0})
    to_ready(b)
    relay_says(b, op(1))
    b.connection_lost("gone", 0.0, fraction=0.0)
    b.op_committed("r1", 1)
    assert sent(b) == []
    assert to_resuming(b).cursors == {"r1": 1}


def test_creating_or_accepting_a_room_gives_it_a_cursor_that_is_resumed() -> None:
    """An ok to create yields RoomJoined before the reply; the next resume names the room."""
    b = boss()
    to_ready(b)
    b.events_received()
    b.request(w.Create(0, "new-room", b"s"), "tok", now=0.0, timeout=5.0)
    [create] = sent(b)
    assert isinstance(create, w.Create)
    relay_says(b, w.Ok(create.req))
    assert b.events_received() == [RoomJoined("new-room"), ReplyArrived("tok", w.Ok(create.req))]
    b.connection_lost("bye", 1.0, fraction=0.0)
    assert to_resuming(b, 2.0).cursors == {"new-room": 0}


def test_room_gone_and_missing_rooms_drop_their_cursors() -> None:
    """room_gone is pushed on after RoomLeft; rooms the relay calls missing are left too."""
    b = boss(cursors={"a": 1, "b": 2})
    resume = to_resuming(b)
    b.events_received()
    relay_says(b, w.Resumed(resume.req, [], ["a"]))
    assert b.events_received() == [RoomLeft("a"), LinkReady(RELAY_PUB, [], ["a"])]
    gone = w.RoomGone("b", "removed")
    relay_says(b, gone)
    assert b.events_received() == [RoomLeft("b"), PushArrived(gone)]
    assert b.cursors == {}


def test_pushes_and_stray_errors_are_reported() -> None:
    """Presence and roster pushes pass through; an error with no req is a complaint."""
    b = boss()
    to_ready(b)
    b.events_received()
    presence, roster = w.Presence("f", True), w.Roster(None, "r", [])
    relay_says(b, presence)
    relay_says(b, roster)
    relay_says(b, w.Error(None, "unknown_room", "no such room"))
    assert b.events_received() == [
        PushArrived(presence), PushArrived(roster), RelayComplained("unknown_room", "no such room")
    ]


def test_a_roster_reply_is_news_told_before_its_answer_in_stream_order() -> None:
    """A roster that answers a request is a push too, between the pushes around it and ahead
    of the request's own answer: the membership actor gets every roster in the relay's order."""
    b = boss()
    to_ready(b)
    b.events_received()
    b.request(w.GetRoster(0, "r"), "tok", now=0.0, timeout=5.0)
    [frame] = sent(b)
    assert isinstance(frame, w.GetRoster)
    member = w.Member("f1", b"ed", b"x", "joined", "f0", b"sig")
    before, reply = w.Roster(None, "r", []), w.Roster(frame.req, "r", [member])
    after = w.Roster(None, "r", [member, member])
    for roster in (before, reply, after):
        relay_says(b, roster)
    assert b.events_received() == [
        PushArrived(before), PushArrived(reply), ReplyArrived("tok", reply), PushArrived(after)
    ]


def test_a_late_reply_to_an_expired_request_is_ignored() -> None:
    """A request fails at its deadline; its reply after that matches nothing."""
    b = boss()
    to_ready(b)
    b.events_received()
    b.request(w.ListRooms(0), "tok", now=0.0, timeout=2.0)
    [frame] = sent(b)
    assert isinstance(frame, w.ListRooms)
    b.tick(2.0)
    [event] = b.events_received()
    assert isinstance(event, RequestFailed) and "within 2 s" in event.error.message
    relay_says(b, w.RoomList(frame.req, []), 3.0)
    assert b.events_received() == [] and state(b) is LinkState.READY


# --- requests and outbox across connections ----------------------------------------------------


def test_requests_wait_for_ready_and_fail_when_the_connection_drops() -> None:
    """Held until resumed; in flight when the link drops: RelayUnreachable, then LinkLost."""
    b = boss()
    b.request(w.ListRooms(0), "held", now=0.0, timeout=5.0)
    assert [type(f) for f in to_ready(b, 1.0)] == [w.ListRooms]
    b.events_received()
    b.connection_lost("reset by peer", 1.0, fraction=0.0)
    failed, lost = b.events_received()
    assert isinstance(failed, RequestFailed) and isinstance(failed.error, RelayUnreachable)
    assert lost == LinkLost("reset by peer", 0.5)


def test_the_outbox_flushes_on_ready_and_again_after_a_drop() -> None:
    """Posts go only when READY, in order; one in flight when the link drops goes again."""
    b = boss(outbox=[item(3, "r2"), item(1)])
    b.post_queued(item(2), 0.0)
    assert sent(b) == []
    posts = to_ready(b)
    assert [(p.room, p.op_id) for p in posts if isinstance(p, w.Post)] == [
        ("r1", "op-1"), ("r2", "op-3")
    ]
    first = posts[0]
    assert isinstance(first, w.Post)
    relay_says(b, w.Posted(first.req, "r1", 10))
    assert PostAccepted(item(1), 10) in b.events_received()
    [nxt] = sent(b)
    assert isinstance(nxt, w.Post) and nxt.op_id == "op-2"
    b.connection_lost("reset", 1.0, fraction=0.0)
    assert b.data_to_send() == [] and b.queued == 2
    again = to_ready(b, 2.0)
    assert [p.op_id for p in again if isinstance(p, w.Post)] == ["op-2", "op-3"]


def test_a_paused_room_flows_again_on_the_tick_at_its_retry_time() -> None:
    """rate_limited pauses the room; the tick at exactly its retry time sends it again."""
    b = boss(outbox=[item(1)])
    [post] = to_ready(b, 10.0)
    assert isinstance(post, w.Post)
    relay_says(b, w.Error(post.req, "rate_limited", "slow down"), 10.0)
    assert happened(b) == [LinkReady(RELAY_PUB, [], [])] and b.next_deadline() == 11.0
    b.tick(10.999)
    assert sent(b) == []
    b.tick(11.0)
    [again] = sent(b)
    assert isinstance(again, w.Post) and again.op_id == "op-1" and again.req != post.req


def test_abandoning_answers_every_open_request() -> None:
    """Held and sent requests all fail with RelayUnreachable when the link goes away."""
    b = boss()
    to_ready(b)
    b.request(w.ListRooms(0), "sent", now=0.0, timeout=5.0)
    b.request(w.ListRooms(0), "also", now=0.0, timeout=5.0)
    b.events_received()
    b.abandon_requests("stopping")
    failed = b.events_received()
    assert [e.token for e in failed if isinstance(e, RequestFailed)] == ["sent", "also"]
    assert b.next_deadline() == math.inf


def test_the_replay_s_newer_epoch_holds_a_post_until_it_is_sealed_anew() -> None:
    """The relay replays a rekeyed op (epoch 1) before ``resumed``; our queued post, sealed under
    epoch 0 while we were away, is not posted: the boss asks for it anew, then posts the new body
    (the simulation's seed 1516)."""
    old = OutboxItem(1, "r1", "op-1", frame_body(0, b"while away"))
    b = boss(outbox=[old], cursors={"r1": 4})
    resume = to_resuming(b)
    relay_says(b, w.Op("r1", 5, "aaaa-bbbb-cccc-dddd", "o5", frame_body(1, b"rekeyed"), 1.0))
    relay_says(b, w.Resumed(resume.req, [], []))
    assert [f for f in sent(b) if isinstance(f, w.Post)] == []
    assert ResealWanted(old) in b.events_received()
    anew = OutboxItem(1, "r1", "op-1", frame_body(1, b"sealed anew"))
    b.resealed(old, Resealed(anew), 0.1)
    [post] = sent(b)
    assert isinstance(post, w.Post) and post.body == anew.body


def test_our_post_replayed_before_resumed_is_taken_and_a_leave_follows_the_room_s_posts() -> None:
    """Sim seed 3116: the answer to our post was lost in a crash; back online we leave the room.
    The resume's replay brings our op back, which answers the item (not posted again, where the
    relay, after the leave, would refuse it as from a non-member though the room read it); the
    room's next post goes before the leave, which follows once that post is taken."""
    b = boss(outbox=[item(1), item(2)])
    b.request(w.Leave(0, "r1"), "leave", now=0.0, timeout=20.0)
    resume = to_resuming(b)
    relay_says(b, w.Op("r1", 7, ME.fingerprint, "op-1", b"body-1", 1.0))
    relay_says(b, w.Resumed(resume.req, [], []))
    assert PostAccepted(item(1), 7, 1.0) in b.events_received()
    post, *rest = sent(b)
    assert isinstance(post, w.Post) and post.op_id == "op-2"
    assert not any(isinstance(f, w.Leave) for f in rest)
    relay_says(b, w.Posted(post.req, "r1", 8))
    [leave] = [f for f in sent(b) if isinstance(f, w.Leave)]
    assert leave.room == "r1"


def test_someone_else_s_op_with_our_op_id_takes_nothing() -> None:
    """Only an op we sent answers our item: the same op id from another sender is not ours."""
    b = boss(outbox=[item(1)])
    resume = to_resuming(b)
    relay_says(b, w.Op("r1", 7, "aaaa-bbbb-cccc-dddd", "op-1", b"x", 1.0))
    relay_says(b, w.Resumed(resume.req, [], []))
    assert not any(isinstance(e, PostAccepted) for e in b.events_received())
    assert [f.op_id for f in sent(b) if isinstance(f, w.Post)] == ["op-1"]
