"""Pairing slots and presence in the relay core."""

from __future__ import annotations

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from tests.relay.harness import ALICE, BOB, CAROL, MALLORY, Ident, World, frames_of


def _open(world: World, conn: int) -> str:
    [slot] = world.ok(conn, w.SlotOpen(world.req()))
    assert isinstance(slot, w.Slot)
    return slot.slot


def test_slot_is_four_digits_and_lives_fifteen_minutes() -> None:
    """slot_open answers a 4-digit number and expires_in 900."""
    world = World()
    a = world.login(ALICE)
    [slot] = world.ok(a, w.SlotOpen(world.req()))
    assert isinstance(slot, w.Slot)
    assert len(slot.slot) == 4 and slot.slot.isdigit() and slot.expires_in == 900.0


def test_join_tells_both_sides_who_the_other_is() -> None:
    """The owner is pushed the joiner's keys; the joiner is answered the owner's."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    number = _open(world, a)
    [reply] = world.ok(b, w.SlotJoin(world.req(), number))
    assert isinstance(reply, w.SlotJoined) and (reply.fingerprint, reply.ed_pub) == (
        ALICE.fp, ALICE.ed_pub)
    assert world.take(a) == [w.SlotJoined(None, number, BOB.fp, BOB.ed_pub, BOB.x_pub)]


def test_slot_admits_one_join_attempt() -> None:
    """Any later join is slot_taken; unknown slots are slot_not_found."""
    world = World()
    a, b, c = world.login(ALICE), world.login(BOB), world.login(CAROL)
    number = _open(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    assert world.error(c, w.SlotJoin(world.req(), number)) == "slot_taken"
    other = "0000" if number != "0000" else "0001"
    assert world.error(c, w.SlotJoin(world.req(), other)) == "slot_not_found"


def test_owner_cannot_join_own_slot() -> None:
    """A slot needs two identities."""
    world = World()
    a = world.login(ALICE)
    number = _open(world, a)
    assert world.error(a, w.SlotJoin(world.req(), number)) == "forbidden"


def test_parts_are_write_once_and_delivered_to_the_other_side() -> None:
    """slot_send pushes slot_msg to the other side; rewriting an index is refused."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    number = _open(world, a)
    world.ok(a, w.SlotSend(world.req(), number, 0, b"pake-a"))  # before the join: kept
    got = world.ok(b, w.SlotJoin(world.req(), number))
    assert w.SlotMsg(number, "owner", 0, b"pake-a") in got
    world.take(a)
    world.ok(b, w.SlotSend(world.req(), number, 0, b"pake-b"))
    assert world.take(a) == [w.SlotMsg(number, "joiner", 0, b"pake-b")]
    assert world.error(b, w.SlotSend(world.req(), number, 0, b"again")) == "slot_part_written"
    assert world.error(a, w.SlotSend(world.req(), number, 0, b"again")) == "slot_part_written"
    assert world.error(a, w.SlotSend(world.req(), number, 16, b"x")) == "bad_frame"
    assert world.error(a, w.SlotSend(world.req(), number, 1, b"x" * 8193)) == "too_large"


def test_strangers_cannot_write_attach_or_close_a_slot() -> None:
    """Only owner and joiner see a slot; to anyone else it does not exist."""
    world = World()
    a, b, m = world.login(ALICE), world.login(BOB), world.login(MALLORY)
    number = _open(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    for frame in (w.SlotSend(world.req(), number, 1, b"x"), w.SlotAttach(world.req(), number),
                  w.SlotClose(world.req(), number)):
        assert world.error(m, frame) == "slot_not_found"


def test_reconnected_side_reattaches_and_gets_every_part_again() -> None:
    """A connection dropped mid-pairing recovers by slot_attach."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    number = _open(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    world.close(a)
    world.ok(b, w.SlotSend(world.req(), number, 0, b"m0"))
    world.ok(b, w.SlotSend(world.req(), number, 1, b"m1"))
    a2 = world.login(ALICE)
    got = world.ok(a2, w.SlotAttach(world.req(), number))
    assert w.SlotJoined(None, number, BOB.fp, BOB.ed_pub, BOB.x_pub) in got
    assert frames_of(got, w.SlotMsg) == [w.SlotMsg(number, "joiner", 0, b"m0"),
                                         w.SlotMsg(number, "joiner", 1, b"m1")]
    world.ok(b, w.SlotSend(world.req(), number, 2, b"m2"))
    assert world.take(a2) == [w.SlotMsg(number, "joiner", 2, b"m2")]


def test_close_burns_the_slot_and_tells_the_other_side() -> None:
    """After slot_close the number is gone for everyone."""
    world = World()
    a, b, c = world.login(ALICE), world.login(BOB), world.login(CAROL)
    number = _open(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    world.take(a)
    world.ok(b, w.SlotClose(world.req(), number))
    assert world.take(a) == [w.SlotClosed(number, "closed")]
    assert world.error(c, w.SlotJoin(world.req(), number)) == "slot_not_found"
    assert world.error(a, w.SlotSend(world.req(), number, 3, b"x")) == "slot_not_found"


def test_slot_expires_after_fifteen_minutes() -> None:
    """A join at 900 s is slot_expired; the tick forgets it and tells the owner."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    number = _open(world, a)
    assert world.error(b, w.SlotJoin(world.req(), number), now=900.0) == "slot_expired"
    world.tick(899.0)
    assert world.core.statistics().slots == 1
    world.tick(900.0)
    assert world.take(a) == [w.SlotClosed(number, "expired")]
    assert world.error(b, w.SlotJoin(world.req(), number), now=901.0) == "slot_not_found"


def test_join_attempts_are_rate_limited_per_source() -> None:
    """Guesses from one address run out; another address is unaffected; time refills."""
    world = World(RelayConfig(guess_burst=3.0, guess_rate=0.1))
    guesser = world.login(MALLORY, source="6.6.6.6")
    for n in ("0001", "0002", "0003"):
        assert world.error(guesser, w.SlotJoin(world.req(), n)) == "slot_not_found"
    assert world.error(guesser, w.SlotJoin(world.req(), "0004")) == "rate_limited"
    elsewhere = world.login(CAROL, source="7.7.7.7")
    assert world.error(elsewhere, w.SlotJoin(world.req(), "0004")) == "slot_not_found"
    assert world.error(guesser, w.SlotJoin(world.req(), "0004"), now=10.0) == "slot_not_found"


def test_successful_joins_are_not_guesses() -> None:
    """Many pairings from one address succeed even with a guess budget of one."""
    world = World(RelayConfig(guess_burst=1.0, guess_rate=0.0001))
    for seed in range(10, 20):
        owner = world.login(Ident(seed), source="8.8.8.8")
        joiner = world.login(Ident(seed + 100), source="8.8.8.8")
        world.ok(joiner, w.SlotJoin(world.req(), _open(world, owner)))
    guesser = world.login(MALLORY, source="8.8.8.8")
    codes = [world.error(guesser, w.SlotJoin(world.req(), f"{n:04d}")) for n in range(12)]
    assert set(codes) <= {"slot_taken", "slot_not_found", "rate_limited"}
    assert codes.count("slot_not_found") == 1 and "rate_limited" in codes


def test_owner_waiting_never_counts_as_guessing() -> None:
    """An owner attaching and writing many times from one address leaves its guesses intact."""
    world = World(RelayConfig(guess_burst=1.0, guess_rate=0.0001))
    a = world.login(ALICE, source="5.5.5.5")
    number = _open(world, a)
    for _ in range(50):
        world.ok(a, w.SlotAttach(world.req(), number))
    for i in range(16):
        world.ok(a, w.SlotSend(world.req(), number, i, b"x"))
    b = world.login(BOB, source="5.5.5.5")  # same address, e.g. both behind one NAT
    world.ok(b, w.SlotJoin(world.req(), number))


def test_open_slots_per_identity_are_capped() -> None:
    """An identity cannot hoard slot numbers."""
    world = World(RelayConfig(max_open_slots=2))
    a = world.login(ALICE)
    _open(world, a)
    _open(world, a)
    assert world.error(a, w.SlotOpen(world.req())) == "rate_limited"


def test_presence_goes_only_to_people_sharing_a_joined_room() -> None:
    """Joined room-mates hear online/offline; strangers and mere invitees hear nothing."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    world.take(a)
    world.take(b)
    m = world.login(MALLORY)
    assert world.take(a) == [] and world.take(b) == []
    world.close(b)
    assert world.take(a) == [w.Presence(BOB.fp, False)]
    assert world.take(m) == []
    b = world.login(BOB, resume=False)
    assert world.take(a) == [w.Presence(BOB.fp, True)]


def test_returning_identity_is_told_who_is_online() -> None:
    """ready is followed by presence of each online room-mate."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    world.close(b)
    conn = world.open()
    [challenge] = world.take(conn)
    assert isinstance(challenge, w.Challenge)
    got = world.send(conn, BOB.hello(challenge, "dev-1"))
    assert isinstance(got[0], w.Ready) and got[1:] == [w.Presence(ALICE.fp, True)]


def test_offline_only_when_last_device_goes() -> None:
    """Two devices of one identity: closing one is not offline."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    b2 = world.login(BOB, device="dev-2")
    world.take(a)
    world.close(b)
    assert world.take(a) == []
    world.close(b2)
    assert world.take(a) == [w.Presence(BOB.fp, False)]


def test_accepting_an_invitation_exchanges_presence() -> None:
    """An invitee sees no presence; on accept both sides learn the other is online."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r", ALICE.vouch("r", ALICE)))
    world.ok(a, w.Add(world.req(), "r", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r", BOB)))
    assert frames_of(world.take(b), w.Presence) == []
    got = world.ok(b, w.Accept(world.req(), "r"))
    assert w.Presence(ALICE.fp, True) in got
    assert w.Presence(BOB.fp, True) in world.take(a)
