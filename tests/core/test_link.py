"""The relay link's sans-IO machine: handshake and pin, resume, cursors, outbox, requests."""

from __future__ import annotations

import math

import pytest
from nacl.signing import SigningKey

from crosstalk import crypto
from crosstalk.core.link import (
    BACKOFF_CAP,
    LinkLost,
    LinkMachine,
    LinkReady,
    LinkState,
    OpArrived,
    OutboxItem,
    PostAccepted,
    PostRejected,
    PushArrived,
    RelayComplained,
    RelayKeySeen,
    ReplyArrived,
    RequestFailed,
    RoomJoined,
    RoomLeft,
    backoff_delay,
    post_retry_delay,
)
from crosstalk.errors import (
    LocalProtocolError,
    RelayKeyMismatch,
    RelayUnreachable,
    RemoteProtocolError,
    SlotNotFound,
)
from crosstalk.wire import relay as w

URL = "ws://relay.test"
NONCE = bytes(range(32))
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
RELAY = SigningKey(b"\x03" * 32)
RELAY_PUB = bytes(RELAY.verify_key)
OTHER_RELAY_PUB = bytes(SigningKey(b"\x04" * 32).verify_key)


def relay_says(frame: w.RelayFrame) -> str:
    return w.encode_frame(frame)


def sent(machine: LinkMachine) -> list[w.ClientFrame]:
    return [w.decode_client_frame(text) for text in machine.data_to_send()]


def challenge(key: bytes = RELAY_PUB) -> str:
    return relay_says(w.Challenge(NONCE, key, w.PROTOCOL_VERSION))


def ready(keys: crypto.Keys = ME, signer: SigningKey = RELAY) -> str:
    transcript = w.ready_transcript(NONCE, RELAY_PUB, keys.ed_pub, keys.x_pub)
    return relay_says(w.Ready(keys.fingerprint, signer.sign(transcript).signature))


def state(m: LinkMachine) -> LinkState:
    """The machine's state, read through a call so mypy does not pin it between inputs."""
    return m.state


def machine(**kwargs: object) -> LinkMachine:
    args: dict[str, object] = {"keys": ME, "device": "dev-1", "url": URL, "pinned_key": RELAY_PUB}
    args.update(kwargs)
    return LinkMachine(**args)  # type: ignore[arg-type]  # test helper forwarding keywords


def to_resuming(m: LinkMachine, now: float = 0.0) -> w.Resume:
    """Drive ``m`` through connect and handshake; return the resume it sends."""
    m.connecting(now)
    m.connected(now)
    m.frame_received(challenge(), now)
    m.frame_received(ready(), now)
    frames = sent(m)
    assert isinstance(frames[-1], w.Resume)
    return frames[-1]


def to_ready(m: LinkMachine, now: float = 0.0) -> list[w.ClientFrame]:
    """Drive ``m`` to READY; return what it sent after ``resumed``."""
    resume = to_resuming(m, now)
    m.frame_received(relay_says(w.Resumed(resume.req, [], [])), now)
    return sent(m)


def item(n: int, room: str = "r1") -> OutboxItem:
    return OutboxItem(n, room, f"op-{n}", f"body-{n}".encode())


# --- backoff ---------------------------------------------------------------------------------


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


def test_backoff_never_exceeds_the_cap_nor_drops_below_half_a_second() -> None:
    """Across attempts and fractions the delay stays within [0.5, 30] seconds."""
    delays = [backoff_delay(a, f / 10) for a in range(1, 40) for f in range(11)]
    assert min(delays) == 0.5
    assert max(delays) == BACKOFF_CAP


@pytest.mark.parametrize(("attempt", "fraction"), [(0, 0.5), (1, -0.1), (1, 1.5)])
def test_backoff_refuses_nonsense_inputs(attempt: int, fraction: float) -> None:
    """Attempt 0 or a fraction outside [0, 1] is our bug, not a delay."""
    with pytest.raises(LocalProtocolError):
        backoff_delay(attempt, fraction)


def test_post_retry_delay_doubles_to_the_cap() -> None:
    """A paused room waits 1, 2, 4, 8, 16, then 30 s for good."""
    assert [post_retry_delay(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


# --- handshake and pin ---------------------------------------------------------------------


def test_handshake_sends_a_signed_hello_then_resumes_with_the_cursors() -> None:
    """hello is signed over the transcript; after ready the machine resumes every cursor."""
    m = machine(cursors={"r1": 4, "r2": 0})
    m.connecting(0.0)
    assert state(m) is LinkState.CONNECTING
    m.connected(0.0)
    assert state(m) is LinkState.AUTHENTICATING
    m.frame_received(challenge(), 0.0)
    [hello] = sent(m)
    assert isinstance(hello, w.Hello)
    transcript = w.hello_transcript(NONCE, RELAY_PUB, ME.ed_pub, ME.x_pub, "dev-1", 1)
    crypto.verify(ME.ed_pub, transcript, hello.sig)
    assert (hello.device, hello.x_pub) == ("dev-1", ME.x_pub)
    m.frame_received(ready(), 0.0)
    assert state(m) is LinkState.RESUMING
    [resume] = sent(m)
    assert isinstance(resume, w.Resume) and resume.cursors == {"r1": 4, "r2": 0}
    rooms = [w.ResumedRoom("r1", 1, 9)]
    m.frame_received(relay_says(w.Resumed(resume.req, rooms, [])), 0.0)
    assert state(m) is LinkState.READY
    assert m.events_received() == [LinkReady(RELAY_PUB, rooms, [])]


def test_first_use_pins_the_key_before_resuming() -> None:
    """With no pin, ready yields RelayKeySeen and resume waits for relay_key_pinned."""
    m = machine(pinned_key=None)
    m.connecting(0.0)
    m.connected(0.0)
    m.frame_received(challenge(), 0.0)
    sent(m)
    m.frame_received(ready(), 0.0)
    assert m.events_received() == [RelayKeySeen(RELAY_PUB)]
    assert sent(m) == []
    assert m.relay_key is None
    m.relay_key_pinned(0.0)
    assert m.relay_key == RELAY_PUB
    assert [type(f) for f in sent(m)] == [w.Resume]


def test_a_different_key_at_a_pinned_url_is_refused_without_saying_hello() -> None:
    """A mismatched relay key raises RelayKeyMismatch and nothing at all is sent."""
    m = machine()
    m.connecting(0.0)
    m.connected(0.0)
    with pytest.raises(RelayKeyMismatch, match="will not talk to it") as caught:
        m.frame_received(challenge(OTHER_RELAY_PUB), 0.0)
    assert caught.value.code == "relay_key_mismatch"
    assert sent(m) == []


@pytest.mark.parametrize(
    "bad_ready",
    [ready(signer=SigningKey(b"\x05" * 32)), ready(keys=crypto.Keys(b"\x06" * 32, b"\x07" * 32))],
    ids=["forged-signature", "someone-else"],
)
def test_a_ready_that_does_not_verify_is_a_protocol_error(bad_ready: str) -> None:
    """A ready signed by another key, or naming another fingerprint, is refused."""
    m = machine()
    m.connecting(0.0)
    m.connected(0.0)
    m.frame_received(challenge(), 0.0)
    with pytest.raises(RemoteProtocolError):
        m.frame_received(bad_ready, 0.0)


def test_a_relay_speaking_another_version_is_refused() -> None:
    """A challenge with another protocol version is a protocol error."""
    m = machine()
    m.connecting(0.0)
    m.connected(0.0)
    with pytest.raises(RemoteProtocolError, match="protocol 2"):
        m.frame_received(relay_says(w.Challenge(NONCE, RELAY_PUB, 2)), 0.0)


def test_frames_out_of_handshake_order_are_protocol_errors() -> None:
    """ready before challenge, and challenge after ready, are both refused."""
    m = machine()
    m.connecting(0.0)
    m.connected(0.0)
    with pytest.raises(RemoteProtocolError):
        m.frame_received(ready(), 0.0)
    m2 = machine()
    to_ready(m2)
    with pytest.raises(RemoteProtocolError):
        m2.frame_received(challenge(), 0.0)


def test_an_error_during_the_handshake_is_a_protocol_error() -> None:
    """An error frame in place of challenge or ready drops the connection."""
    m = machine()
    m.connecting(0.0)
    m.connected(0.0)
    with pytest.raises(RemoteProtocolError, match="unauthenticated"):
        m.frame_received(relay_says(w.Error(None, "unauthenticated", "no")), 0.0)


def test_inputs_in_the_wrong_state_park_the_machine_in_error() -> None:
    """A frame while disconnected, or connected() twice, is our bug: ERROR."""
    m = machine()
    with pytest.raises(LocalProtocolError):
        m.frame_received(challenge(), 0.0)
    assert state(m) is LinkState.ERROR
    m2 = machine()
    m2.connecting(0.0)
    m2.connected(0.0)
    with pytest.raises(LocalProtocolError):
        m2.connected(0.0)
    assert state(m2) is LinkState.ERROR


# --- inbound ops and cursors ---------------------------------------------------------------


def test_an_op_is_acknowledged_only_after_it_is_committed() -> None:
    """A new op is reported; the ack goes out only from op_committed, which moves the cursor."""
    m = machine(cursors={"r1": 2})
    to_ready(m)
    m.events_received()
    op = w.Op("r1", 3, "aaaa-bbbb-cccc-dddd", "o3", b"x", 1.0)
    m.frame_received(relay_says(op), 0.0)
    assert m.events_received() == [OpArrived(op)]
    assert sent(m) == []
    m.op_committed("r1", 3)
    assert sent(m) == [w.Ack("r1", 3)]
    assert m.cursors == {"r1": 3}


def test_returned_events_come_back_first_and_in_order() -> None:
    """Events the shell could not carry out are drained again ahead of those that came since."""
    m = machine(cursors={"r1": 2})
    to_ready(m)
    m.events_received()
    ops = [w.Op("r1", seq, "aaaa-bbbb-cccc-dddd", f"o{seq}", b"x", 1.0) for seq in (3, 4, 5)]
    for op in ops[:2]:
        m.frame_received(relay_says(op), 0.0)
    taken = m.events_received()
    m.frame_received(relay_says(ops[2]), 0.0)
    m.events_returned(taken)
    assert m.events_received() == [OpArrived(op) for op in ops]
    assert m.events_received() == []


def test_an_op_at_or_below_the_cursor_is_acknowledged_again_and_not_reported() -> None:
    """Re-delivery of a committed op acks it at once and emits nothing."""
    m = machine(cursors={"r1": 5})
    to_ready(m)
    m.events_received()
    m.frame_received(relay_says(w.Op("r1", 5, "a", "o5", b"x", 1.0)), 0.0)
    assert m.events_received() == []
    assert sent(m) == [w.Ack("r1", 5)]


def test_a_commit_after_the_connection_dropped_sends_nothing() -> None:
    """op_committed while disconnected queues no ack; the next resume carries the cursor."""
    m = machine(cursors={"r1": 0})
    to_ready(m)
    m.frame_received(relay_says(w.Op("r1", 1, "a", "o1", b"x", 1.0)), 0.0)
    m.connection_lost("gone", 0.0)
    m.op_committed("r1", 1)
    assert sent(m) == []
    assert to_resuming(m).cursors == {"r1": 1}


def test_creating_or_accepting_a_room_gives_it_a_cursor_that_is_resumed() -> None:
    """An ok to create yields RoomJoined before the reply, and the next resume names the room."""
    m = machine()
    to_ready(m)
    m.events_received()
    m.request(w.Create(0, "new-room", b"s"), "tok", now=0.0, timeout=5.0)
    [create] = sent(m)
    assert isinstance(create, w.Create)
    m.frame_received(relay_says(w.Ok(create.req)), 0.0)
    assert m.events_received() == [RoomJoined("new-room"), ReplyArrived("tok", w.Ok(create.req))]
    m.connection_lost("bye", 1.0)
    assert to_resuming(m, 2.0).cursors == {"new-room": 0}


def test_room_gone_and_missing_rooms_drop_their_cursors() -> None:
    """room_gone is pushed on after RoomLeft; rooms the relay calls missing are left too."""
    m = machine(cursors={"a": 1, "b": 2})
    resume = to_resuming(m)
    m.frame_received(relay_says(w.Resumed(resume.req, [], ["a"])), 0.0)
    assert m.events_received() == [RoomLeft("a"), LinkReady(RELAY_PUB, [], ["a"])]
    gone = w.RoomGone("b", "removed")
    m.frame_received(relay_says(gone), 0.0)
    assert m.events_received() == [RoomLeft("b"), PushArrived(gone)]
    assert m.cursors == {}


def test_pushes_and_stray_errors_are_reported() -> None:
    """Presence and roster pushes pass through; an error with no req is a complaint."""
    m = machine()
    to_ready(m)
    m.events_received()
    presence = w.Presence("f", True)
    roster = w.Roster(None, "r", [])
    m.frame_received(relay_says(presence), 0.0)
    m.frame_received(relay_says(roster), 0.0)
    m.frame_received(relay_says(w.Error(None, "unknown_room", "no such room")), 0.0)
    assert m.events_received() == [
        PushArrived(presence), PushArrived(roster), RelayComplained("unknown_room", "no such room")
    ]


# --- outbox ------------------------------------------------------------------------------


def test_the_outbox_flushes_in_order_one_post_per_room_in_flight() -> None:
    """Queued items go after resumed, the first of each room at once, the next on posted."""
    m = machine(outbox=[item(3, "r2"), item(2), item(1)])
    m.post_queued(item(4), 0.0)  # not connected: nothing is sent yet
    assert sent(m) == []
    posts = to_ready(m)
    assert [(p.room, p.op_id) for p in posts if isinstance(p, w.Post)] == [
        ("r1", "op-1"), ("r2", "op-3")
    ]
    first = posts[0]
    assert isinstance(first, w.Post)
    m.frame_received(relay_says(w.Posted(first.req, "r1", 10)), 0.0)
    assert PostAccepted(item(1), 10) in m.events_received()
    [nxt] = sent(m)
    assert isinstance(nxt, w.Post) and nxt.op_id == "op-2"
    assert m.queued == 3


def test_a_transient_refusal_pauses_that_room_until_its_retry_time() -> None:
    """rate_limited pauses the room for 1 s exactly, then the same op is sent again."""
    m = machine(outbox=[item(1)])
    [post] = to_ready(m, 10.0)
    assert isinstance(post, w.Post)
    m.events_received()
    m.frame_received(relay_says(w.Error(post.req, "rate_limited", "slow down")), 10.0)
    assert m.events_received() == []
    assert m.next_deadline() == 11.0
    m.tick(10.999)
    assert sent(m) == []
    m.tick(11.0)
    [again] = sent(m)
    assert isinstance(again, w.Post) and again.op_id == "op-1" and again.req != post.req


def test_a_permanent_refusal_drops_the_item_and_the_next_one_goes() -> None:
    """too_large rejects the item for good (PostRejected) and the room's next item is sent."""
    m = machine(outbox=[item(1), item(2)])
    [post] = to_ready(m)
    assert isinstance(post, w.Post)
    m.events_received()
    m.frame_received(relay_says(w.Error(post.req, "too_large", "1 MiB")), 0.0)
    [event] = m.events_received()
    assert isinstance(event, PostRejected) and event.item == item(1)
    assert event.error.code == "too_large"
    [nxt] = sent(m)
    assert isinstance(nxt, w.Post) and nxt.op_id == "op-2"


def test_a_post_in_flight_when_the_link_drops_is_sent_again_after_resume() -> None:
    """The outbox keeps an unanswered post; the next connection sends it first."""
    m = machine(outbox=[item(1)])
    to_ready(m)
    m.post_queued(item(2, "r2"), 1.0)  # written to the buffer, never sent: dropped with the link
    m.connection_lost("reset", 1.0)
    assert m.data_to_send() == []
    assert m.queued == 2
    again = to_ready(m, 2.0)
    assert [p.op_id for p in again if isinstance(p, w.Post)] == ["op-1", "op-2"]


# --- requests ----------------------------------------------------------------------------


def test_a_request_gets_a_fresh_req_and_its_reply() -> None:
    """The caller's req is replaced; the matching reply comes back with the caller's token."""
    m = machine()
    to_ready(m)
    m.events_received()
    m.request(w.SlotOpen(999), "tok", now=0.0, timeout=5.0)
    [frame] = sent(m)
    assert isinstance(frame, w.SlotOpen) and frame.req != 999
    reply = w.Slot(frame.req, "1234", 900.0)
    m.frame_received(relay_says(reply), 0.0)
    assert m.events_received() == [ReplyArrived("tok", reply)]


def test_a_relay_error_reply_becomes_our_error_with_the_same_code() -> None:
    """error slot_not_found answers the request with SlotNotFound."""
    m = machine()
    to_ready(m)
    m.request(w.SlotJoin(0, "0001"), "tok", now=0.0, timeout=5.0)
    [frame] = sent(m)
    assert isinstance(frame, w.SlotJoin)
    m.events_received()
    m.frame_received(relay_says(w.Error(frame.req, "slot_not_found", "no slot")), 0.0)
    [event] = m.events_received()
    assert isinstance(event, RequestFailed) and isinstance(event.error, SlotNotFound)


def test_a_request_made_while_disconnected_waits_for_ready() -> None:
    """A held request goes out right after resumed."""
    m = machine()
    m.request(w.ListRooms(0), "tok", now=0.0, timeout=5.0)
    frames = to_ready(m, 1.0)
    assert [type(f) for f in frames] == [w.ListRooms]


def test_a_held_request_fails_at_its_deadline_with_relay_unreachable() -> None:
    """Not connected by the deadline: RequestFailed(RelayUnreachable) exactly then."""
    m = machine()
    m.connecting(0.0)
    m.connection_lost("connection refused", 0.0)
    m.events_received()
    m.request(w.ListRooms(0), "tok", now=1.0, timeout=5.0)
    assert m.next_deadline() == 6.0
    m.tick(5.9)
    assert m.events_received() == []
    m.tick(6.0)
    [event] = m.events_received()
    assert isinstance(event, RequestFailed) and isinstance(event.error, RelayUnreachable)
    assert "connection refused" in event.error.message
    assert m.next_deadline() == math.inf


def test_an_unanswered_request_expires_and_its_late_reply_is_ignored() -> None:
    """A sent request fails at its deadline; a reply after that changes nothing."""
    m = machine()
    to_ready(m)
    m.events_received()
    m.request(w.ListRooms(0), "tok", now=0.0, timeout=2.0)
    [frame] = sent(m)
    assert isinstance(frame, w.ListRooms)
    m.tick(2.0)
    [event] = m.events_received()
    assert isinstance(event, RequestFailed) and "did not answer within 2 s" in event.error.message
    m.frame_received(relay_says(w.RoomList(frame.req, [])), 3.0)
    assert m.events_received() == []


def test_requests_in_flight_fail_when_the_connection_drops() -> None:
    """A dropped connection answers every sent request with RelayUnreachable, then LinkLost."""
    m = machine()
    to_ready(m)
    m.events_received()
    m.request(w.ListRooms(0), "tok", now=0.0, timeout=5.0)
    m.connection_lost("reset by peer", 1.0)
    failed, lost = m.events_received()
    assert isinstance(failed, RequestFailed) and isinstance(failed.error, RelayUnreachable)
    assert lost == LinkLost("reset by peer")


def test_only_request_frames_may_be_requested() -> None:
    """post, resume and ack have their own inputs; requesting them is our bug."""
    m = machine()
    with pytest.raises(LocalProtocolError):
        m.request(w.Post(0, "r", "o", b""), "tok", now=0.0, timeout=1.0)  # type: ignore[arg-type]


def test_failed_attempts_count_up_and_reset_once_ready() -> None:
    """Each lost attempt raises the backoff; reaching READY resets it."""
    m = machine()
    for n in range(1, 4):
        m.connecting(0.0)
        m.connection_lost("refused", 0.0)
        assert m.attempts == n
    assert m.retry_delay(1.0) == 4.0
    assert m.last_error == "refused"
    to_ready(m)
    assert m.attempts == 0


def test_abandoning_answers_every_open_request() -> None:
    """Held and sent requests all fail with RelayUnreachable when the link goes away."""
    m = machine()
    m.request(w.ListRooms(0), "held", now=0.0, timeout=5.0)
    to_ready(m)
    m.request(w.ListRooms(0), "sent", now=0.0, timeout=5.0)
    m.connection_lost("bye", 0.0)
    m.request(w.ListRooms(0), "held-again", now=0.0, timeout=5.0)
    m2 = machine()
    to_ready(m2)
    m2.request(w.ListRooms(0), "in-flight", now=0.0, timeout=5.0)
    for each in (m, m2):
        each.events_received()
        each.abandon_requests("stopping")
    failed = [e for each in (m, m2) for e in each.events_received()]
    assert all(isinstance(e, RequestFailed) for e in failed)
    assert [e.token for e in failed if isinstance(e, RequestFailed)] == ["held-again", "in-flight"]
    assert m.next_deadline() == m2.next_deadline() == math.inf


def test_a_refused_resume_drops_the_connection() -> None:
    """An error in answer to resume is a protocol error naming the relay's code."""
    m = machine()
    resume = to_resuming(m)
    with pytest.raises(RemoteProtocolError, match="bad_frame"):
        m.frame_received(relay_says(w.Error(resume.req, "bad_frame", "cursors")), 0.0)
