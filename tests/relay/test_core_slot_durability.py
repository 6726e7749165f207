"""Pairing slots and grants as durable state of the relay core: their writes, and restarts.

Each test drives a core through the fake World, which commits every write of a batch before
recording the batch's frames, then starts a new core from the same storage (what a restarted
relay, or a newly elected cluster leader, does) and checks what it serves.
"""

from __future__ import annotations

from crosstalk.wire import relay as w
from relay.effects import Send
from relay.limits import RelayConfig
from relay.storage import (
    GrantDeleted,
    GrantPut,
    MemoryStorage,
    Peer,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    grant_key,
)
from tests.relay.harness import ALICE, BOB, CAROL, MALLORY, Ident, WallClock, World, frames_of

TTL = 900.0


def peer(who: Ident) -> Peer:
    return Peer(who.fp, who.ed_pub, who.x_pub)


def fresh(clock: WallClock, config: RelayConfig | None = None) -> World:
    return World(config, storage=MemoryStorage(clock=clock))


def restart(world: World) -> World:
    """A new core on the same storage: every connection is gone."""
    return World(world.config, storage=world.storage)


def open_slot(world: World, conn: int, now: float = 0.0) -> str:
    [slot] = frames_of(world.ok(conn, w.SlotOpen(world.req()), now), w.Slot)
    assert isinstance(slot, w.Slot)
    return slot.slot




def test_opening_a_slot_writes_it_with_its_expiry_before_the_reply() -> None:
    """slot_open commits SlotOpened (owner, now + 15 min) ahead of the slot frame."""
    world = fresh(WallClock(100.0))
    a = world.login(ALICE, now=100.0)
    number = open_slot(world, a, now=100.0)
    assert world.effects[0] == SlotOpened(number, peer(ALICE), 100.0 + TTL)
    assert isinstance(world.effects[1], Send) and len(world.effects) == 2


def test_the_join_spends_the_slot_and_records_the_grant_before_anyone_hears() -> None:
    """slot_join commits SlotFilled and GrantPut before the reply and the owner's push."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number), now=30.0)
    x, y = grant_key(ALICE.fp, BOB.fp)
    assert world.effects[:2] == [SlotFilled(number, peer(BOB)), GrantPut(x, y, 30.0 + TTL)]
    assert all(isinstance(e, Send) for e in world.effects[2:])


def test_each_part_is_written_before_it_is_acknowledged_or_delivered() -> None:
    """slot_send commits SlotPartPut ahead of its ok and the other side's slot_msg."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    world.ok(a, w.SlotSend(world.req(), number, 2, b"pake"))
    assert world.effects[0] == SlotPartPut(number, "owner", 2, b"pake")
    assert [type(e) for e in world.effects[1:]] == [Send, Send]


def test_closing_writes_the_removal_before_the_ok() -> None:
    """slot_close (a burn) commits SlotRemoved ahead of its ok and the other side's push."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    world.ok(b, w.SlotClose(world.req(), number))
    assert world.effects[0] == SlotRemoved(number)
    assert world.take(a)[-1] == w.SlotClosed(number, "closed")


def test_refused_joins_write_nothing() -> None:
    """Unknown, taken, own, expired and rate-limited joins leave no write behind."""
    world = fresh(WallClock(), RelayConfig(guess_burst=2.0, guess_rate=0.0001))
    a, b, c = world.login(ALICE), world.login(BOB), world.login(CAROL)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    other = open_slot(world, a)
    free = [n for n in ("9999", "9998", "9997") if n not in {number, other}]
    refusals = [(c, number, 0.0, "slot_taken"), (a, other, 0.0, "forbidden"),
                (c, other, TTL, "slot_expired"), (c, free[0], 0.0, "slot_not_found"),
                (c, free[1], 0.0, "rate_limited")]
    for conn, slot, now, code in refusals:
        assert world.error(conn, w.SlotJoin(world.req(), slot), now=now) == code
        assert world.writes() == [], code


def test_expiry_removes_slots_and_grants_at_their_exact_times() -> None:
    """A tick at 899 s writes nothing; at 900 s the slot goes; the grant at join + 900 s."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number), now=60.0)
    world.tick(899.0)
    assert world.writes() == []
    world.tick(900.0)
    assert world.writes() == [SlotRemoved(number)]
    world.tick(959.0)
    assert world.writes() == []
    world.tick(960.0)
    assert world.writes() == [GrantDeleted(*grant_key(ALICE.fp, BOB.fp))]
    assert world.storage.load().slots == [] and world.storage.load().grants == []


def test_a_restarted_relay_serves_an_open_slot_and_its_parts() -> None:
    """The joiner joins after a restart and gets the owner's part; the owner attaches and
    learns who joined."""
    clock = WallClock()
    world = fresh(clock)
    a = world.login(ALICE)
    number = open_slot(world, a)
    world.ok(a, w.SlotSend(world.req(), number, 0, b"pake-a"))
    clock.now = 120.0
    world = restart(world)
    b = world.login(BOB, now=120.0)
    got = world.ok(b, w.SlotJoin(world.req(), number), now=120.0)
    assert w.SlotMsg(number, "owner", 0, b"pake-a") in got
    world.ok(b, w.SlotSend(world.req(), number, 0, b"pake-b"), now=121.0)
    a = world.login(ALICE, now=122.0)
    got = world.ok(a, w.SlotAttach(world.req(), number), now=122.0)
    assert got[1:] == [w.SlotJoined(None, number, BOB.fp, BOB.ed_pub, BOB.x_pub),
                       w.SlotMsg(number, "joiner", 0, b"pake-b")]
    assert world.error(a, w.SlotSend(world.req(), number, 0, b"again"), 123.0) == (
        "slot_part_written")


def test_a_restart_never_gives_a_spent_slot_a_fresh_join() -> None:
    """After restarts, another identity is still slot_taken; the joiner may join again."""
    clock = WallClock()
    world = fresh(clock)
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(b, w.SlotJoin(world.req(), number))
    for _ in range(2):
        world = restart(world)
        m = world.login(MALLORY, source="6.6.6.6")
        assert world.error(m, w.SlotJoin(world.req(), number)) == "slot_taken"
    b = world.login(BOB)
    req = world.req()
    [reply] = world.ok(b, w.SlotJoin(req, number))
    assert reply == w.SlotJoined(req, number, ALICE.fp, ALICE.ed_pub, ALICE.x_pub)
    assert world.writes() == []


def test_the_joiner_joining_again_is_answered_without_telling_the_owner_twice() -> None:
    """A repeated join by the joiner (its reply lost) writes nothing and pushes nothing."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(a, w.SlotSend(world.req(), number, 0, b"m0"))
    world.ok(b, w.SlotJoin(world.req(), number))
    world.take(a)
    got = world.ok(b, w.SlotJoin(world.req(), number))
    assert frames_of(got, w.SlotMsg) == [w.SlotMsg(number, "owner", 0, b"m0")]
    assert world.writes() == [] and world.take(a) == []


def test_closed_and_expired_slots_do_not_come_back_after_a_restart() -> None:
    """A burned slot is gone; one that expired while the relay was down is never loaded."""
    clock = WallClock()
    world = fresh(clock)
    a, b = world.login(ALICE), world.login(BOB)
    burned = open_slot(world, a)
    lapsed = open_slot(world, a, now=10.0)
    world.ok(a, w.SlotSend(world.req(), lapsed, 0, b"old"), now=10.0)
    world.ok(a, w.SlotClose(world.req(), burned))
    assert [s.number for s in world.storage.load().slots] == [lapsed]
    clock.now = 10.0 + TTL  # no tick ran: the relay was down when it expired
    world = restart(world)
    assert world.core.statistics().slots == 0
    b = world.login(BOB, now=clock.now)
    for number in (burned, lapsed):
        assert world.error(b, w.SlotJoin(world.req(), number), now=clock.now) == "slot_not_found"


def test_a_reused_number_starts_without_the_old_slots_parts_or_joiner() -> None:
    """Opening a number that an unremoved expired slot held replaces it entirely."""
    clock = WallClock()
    world = fresh(clock)
    a, b = world.login(ALICE), world.login(BOB)
    number = open_slot(world, a)
    world.ok(a, w.SlotSend(world.req(), number, 0, b"old"))
    world.ok(b, w.SlotJoin(world.req(), number))
    clock.now = TTL
    world = restart(world)  # its draw repeats, so the same logins then open pick the same number
    a, b = world.login(ALICE, now=TTL), world.login(BOB, now=TTL)
    assert open_slot(world, a, now=TTL) == number
    [again] = world.storage.load().slots
    assert (again.number, again.owner, again.joiner, again.parts) == (
        number, peer(ALICE), None, [])


def test_the_pairing_grant_survives_a_restart_and_is_spent_once() -> None:
    """After a restart the owner may still add the joiner once; a spent grant stays spent."""
    world = fresh(WallClock())
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world = restart(world)
    a, b = world.login(ALICE), world.login(BOB)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    assert GrantDeleted(*grant_key(ALICE.fp, BOB.fp)) in world.writes()
    world.ok(a, w.Remove(world.req(), "r1", BOB.fp))
    world = restart(world)
    a = world.login(ALICE)
    world.ok(a, w.Create(world.req(), "r2", ALICE.vouch("r2", ALICE)))
    add = w.Add(world.req(), "r2", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r2", BOB))
    assert world.error(a, add) == "forbidden"


def test_a_restart_resets_only_the_per_source_guess_window() -> None:
    """The in-memory guess bucket starts afresh after a restart (documented, by design)."""
    world = fresh(WallClock(), RelayConfig(guess_burst=1.0, guess_rate=0.0001))
    m = world.login(MALLORY, source="6.6.6.6")
    assert world.error(m, w.SlotJoin(world.req(), "0000")) == "slot_not_found"
    assert world.error(m, w.SlotJoin(world.req(), "0000")) == "rate_limited"
    world = restart(world)
    m = world.login(MALLORY, source="6.6.6.6")
    assert world.error(m, w.SlotJoin(world.req(), "0000")) == "slot_not_found"
