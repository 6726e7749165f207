"""The relay core's handshake and bad-input rules."""

from __future__ import annotations

import json

import pytest
from nacl.signing import VerifyKey

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from tests.relay.harness import ALICE, BOB, RELAY_KEY, World


def test_challenge_carries_fresh_nonce_relay_key_and_version() -> None:
    """Each connection is greeted with its own 32-byte nonce, the relay key and the version."""
    world = World()
    first, second = world.open(), world.open()
    [a], [b] = world.take(first), world.take(second)
    assert isinstance(a, w.Challenge) and isinstance(b, w.Challenge)
    assert len(a.nonce) == 32 and a.nonce != b.nonce
    assert a.relay_key == bytes(RELAY_KEY.verify_key)
    assert a.version == w.PROTOCOL_VERSION


def test_valid_hello_gets_ready_signed_by_relay_over_nonce_and_client_keys() -> None:
    """ready names the fingerprint of the signing key and verifies under the relay key."""
    world = World()
    conn = world.open()
    [challenge] = world.take(conn)
    assert isinstance(challenge, w.Challenge)
    [ready] = world.send(conn, ALICE.hello(challenge, "laptop"))
    assert isinstance(ready, w.Ready)
    assert ready.fingerprint == ALICE.fp
    transcript = w.ready_transcript(challenge.nonce, challenge.relay_key, ALICE.ed_pub, ALICE.x_pub)
    VerifyKey(challenge.relay_key).verify(transcript, ready.sig)


def test_nothing_is_accepted_before_hello() -> None:
    """Any request before ready is unauthenticated and changes nothing."""
    world = World()
    conn = world.open()
    world.take(conn)
    assert world.error(conn, w.Create(1, "room1", ALICE.vouch("room1", ALICE))) == "unauthenticated"
    assert world.error(conn, w.SlotOpen(2)) == "unauthenticated"
    assert world.core.statistics().rooms == 0
    assert world.core.statistics().slots == 0


def test_hello_signed_for_another_challenge_is_refused() -> None:
    """A hello replayed from another connection's challenge does not authenticate."""
    world = World()
    one, two = world.open(), world.open()
    [c1] = world.take(one)
    world.take(two)
    assert isinstance(c1, w.Challenge)
    assert world.error(two, ALICE.hello(c1, "laptop")) == "unauthenticated"
    assert world.core.statistics().authenticated == 0


def test_hello_with_someone_elses_key_is_refused() -> None:
    """Claiming Bob's public key while signing with Alice's key fails."""
    world = World()
    conn = world.open()
    [c] = world.take(conn)
    assert isinstance(c, w.Challenge)
    genuine = ALICE.hello(c, "laptop")
    forged = w.Hello(BOB.ed_pub, BOB.x_pub, "laptop", w.PROTOCOL_VERSION, genuine.sig)
    assert world.error(conn, forged) == "unauthenticated"


def test_hello_with_other_protocol_version_gets_version_error() -> None:
    """A client speaking another version is told so."""
    world = World()
    conn = world.open()
    [c] = world.take(conn)
    assert isinstance(c, w.Challenge)
    hello = ALICE.hello(c, "laptop")
    future = w.Hello(hello.ed_pub, hello.x_pub, "laptop", 99, hello.sig)
    assert world.error(conn, future) == "version"


def test_second_hello_on_ready_connection_is_bad_frame() -> None:
    """A connection authenticates once."""
    world = World()
    conn = world.login(ALICE)
    assert world.error(conn, w.Hello(ALICE.ed_pub, ALICE.x_pub, "x", 1, b"s" * 64)) == "bad_frame"


def test_malformed_frames_each_get_bad_frame_with_req_when_known() -> None:
    """Garbage, wrong types and unknown ops are answered, carrying the req if one was readable."""
    world = World()
    conn = world.login(ALICE)
    for text in ["not json", "[1,2]", '{"t":"nope","req":5}', '{"t":"post","req":"1"}',
                 '{"t":"ack","room":"r","seq":true}', '{"t":"post","req":3,"room":"r",'
                 '"op_id":"o","body":"%%%"}']:
        assert world.error(conn, text) == "bad_frame", text
    got = world.raw(conn, json.dumps({"t": "roster", "req": 77, "room": 5}))
    assert isinstance(got[0], w.Error) and got[0].req is None
    got = world.raw(conn, json.dumps({"t": "roster", "req": 78, "room": "../etc", "have": 0}))
    assert isinstance(got[0], w.Error) and got[0].req == 78


def test_binary_frames_are_bad_frames() -> None:
    """Frames are JSON text; bytes are refused without harm."""
    world = World()
    conn = world.login(ALICE)
    got = world.raw(conn, b"\x00\x01")
    assert isinstance(got[0], w.Error) and got[0].code == "bad_frame"


def test_connection_closed_only_after_max_bad_frames_and_others_unaffected() -> None:
    """The 20th bad frame closes that connection; a well-behaved one keeps working."""
    world = World(RelayConfig(max_bad_frames=20))
    bad, good = world.open(), world.login(BOB)
    for _ in range(19):
        world.raw(bad, "garbage")
    assert world.closed == []
    world.raw(bad, "garbage")
    assert world.closed == [bad]
    assert world.raw(bad, "garbage") == []  # a closing connection is ignored
    world.ok(good, w.ListRooms(world.req()))


def test_refused_requests_do_not_count_as_misbehaviour() -> None:
    """Rule refusals (unknown room) never close a connection."""
    world = World(RelayConfig(max_bad_frames=3))
    conn = world.login(ALICE)
    for _ in range(10):
        assert world.error(conn, w.GetRoster(world.req(), "nowhere")) == "unknown_room"
    assert world.closed == []


@pytest.mark.parametrize("cap", [1, 2, 5])
def test_past_the_per_address_cap_the_oldest_waiting_connection_is_shed(cap: int) -> None:
    """Each connection past ``cap`` unauthenticated ones from one address closes the oldest
    still waiting; another address, and a connection that said hello, are not counted."""
    world = World(RelayConfig(max_unauthenticated_per_source=cap, max_unauthenticated=1000))
    greeted = world.login(ALICE, source="10.0.0.1")
    other = [world.open("10.0.0.2") for _ in range(cap)]
    waiting = [world.open("10.0.0.1") for _ in range(cap)]
    assert world.closed == []
    for _ in range(3):
        waiting.append(world.open("10.0.0.1"))
        assert world.closed == [waiting.pop(0)]
        world.closed.clear()
    # The one that left frees its place: the next one sheds nobody.
    world.close(waiting.pop(0))
    waiting.append(world.open("10.0.0.1"))
    assert world.closed == []
    assert greeted not in world.closed and not set(other) & set(world.closed)


def test_past_the_relay_wide_cap_the_oldest_waiting_connection_of_any_address_is_shed() -> None:
    """The relay-wide cap sheds the oldest waiting connection, whichever address it came from."""
    world = World(RelayConfig(max_unauthenticated_per_source=10, max_unauthenticated=4))
    first = world.open("10.0.0.1")
    rest = [world.open(f"10.0.0.{n}") for n in (2, 3, 4)]
    assert world.closed == []
    world.open("10.0.0.5")
    assert world.closed == [first]
    world.open("10.0.0.6")
    assert world.closed == [first, rest[0]]
