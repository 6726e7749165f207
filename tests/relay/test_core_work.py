"""Pairing slots between strangers cost a proof of work, and slot actions are rate-limited per
address and per identity, in the relay core."""

from __future__ import annotations

import attrs
import pytest

from crosstalk.crypto import do_work, work_done
from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from tests.relay.harness import ALICE, BOB, CAROL, Ident, World

BITS = 8  # cheap in tests; the relay's default is 17
CONFIG = RelayConfig(slot_work_bits=BITS)


def _ask(world: World, conn: int, slot: str = "") -> w.Work:
    [work] = [f for f in world.ok(conn, w.WorkAsk(world.req(), slot)) if isinstance(f, w.Work)]
    return work


def _open_paid(world: World, conn: int) -> str:
    work = _ask(world, conn)
    [slot] = world.ok(conn, w.SlotOpen(world.req(), do_work(work.seed, work.bits)))
    assert isinstance(slot, w.Slot)
    return slot.slot


def _known_pair(world: World) -> tuple[int, int]:
    """ALICE and BOB, paired (paying) and in a room together: no longer strangers."""
    a, b = world.login(ALICE), world.login(BOB)
    number = _open_paid(world, a)
    work = _ask(world, b, number)
    world.ok(b, w.SlotJoin(world.req(), number, do_work(work.seed, work.bits)))
    world.take(a)
    world.room_of(a, ALICE, "r1", (b, BOB))
    return a, b


def test_a_proof_solves_its_seed_and_no_other() -> None:
    """do_work's proof passes work_done for its seed and fails for another seed."""
    proof = do_work(b"seed-1", 12)
    assert work_done(b"seed-1", proof, 12)
    assert not work_done(b"seed-2", proof, 12)
    assert work_done(b"anything", b"", 0)


def test_an_old_client_without_work_is_told_work_required() -> None:
    """A slot_open from a client that sends no work field decodes, and is work_required."""
    world = World(CONFIG, work=True)
    a = world.login(ALICE)
    assert world.error(a, '{"t":"slot_open","req":7}') == "work_required"


def test_a_stranger_pays_once_per_slot() -> None:
    """A proof opens one slot; the same proof again is refused (the seed is spent)."""
    world = World(CONFIG, work=True)
    a = world.login(ALICE)
    work = _ask(world, a)
    assert work.bits == BITS and len(work.seed) == 16
    proof = do_work(work.seed, work.bits)
    world.ok(a, w.SlotOpen(world.req(), proof))
    assert world.error(a, w.SlotOpen(world.req(), proof)) == "work_required"


def test_a_wrong_proof_is_refused_and_spends_the_seed() -> None:
    """A proof that does not solve the seed is work_required, and the seed cannot be retried."""
    world = World(CONFIG, work=True)
    a = world.login(ALICE)
    work = _ask(world, a)
    proof = do_work(work.seed, work.bits)
    wrong = next(p for p in (bytes([i]) * 8 for i in range(256))
                 if not work_done(work.seed, p, BITS))
    assert world.error(a, w.SlotOpen(world.req(), wrong)) == "work_required"
    assert world.error(a, w.SlotOpen(world.req(), proof)) == "work_required"


def test_a_known_identity_pays_nothing_and_neither_does_its_invitee() -> None:
    """Someone who shares a room opens for free; a stranger joining their slot pays nothing."""
    world = World(CONFIG, work=True)
    a, _ = _known_pair(world)
    work = _ask(world, a)
    assert (work.seed, work.bits) == (b"", 0)
    [slot] = world.ok(a, w.SlotOpen(world.req()))
    assert isinstance(slot, w.Slot)
    c = world.login(CAROL)
    assert _ask(world, c, slot.slot).bits == 0
    world.ok(c, w.SlotJoin(world.req(), slot.slot))


def test_a_stranger_joining_a_strangers_slot_pays() -> None:
    """Both sides strangers: the join needs a proof too."""
    world = World(CONFIG, work=True)
    a, b = world.login(ALICE), world.login(BOB)
    number = _open_paid(world, a)
    assert world.error(b, w.SlotJoin(world.req(), number)) == "work_required"


def test_creating_a_room_alone_does_not_make_a_stranger_known() -> None:
    """A room of one is no acquaintance: its creator still pays."""
    world = World(CONFIG, work=True)
    a = world.login(ALICE)
    world.ok(a, w.Create(world.req(), "solo", ALICE.vouch("solo", ALICE)))
    assert _ask(world, a).bits == BITS


def test_one_address_opening_and_joining_with_throwaways_is_rate_limited() -> None:
    """Throwaway identities from one address get ``slot_burst`` slot actions, then
    rate_limited; another address still opens and joins."""
    world = World(RelayConfig(slot_burst=6.0, slot_rate=0.001))
    codes = []
    for n in range(10, 18):
        owner = world.login(Ident(n), source="10.9.9.9")
        joiner = world.login(Ident(n + 100), source="10.9.9.9")
        [got] = world.send(owner, w.SlotOpen(world.req()))
        if isinstance(got, w.Error):
            codes.append(got.code)
            continue
        assert isinstance(got, w.Slot)
        [joined] = world.send(joiner, w.SlotJoin(world.req(), got.slot))[:1]
        codes.append(joined.code if isinstance(joined, w.Error) else "ok")
    assert codes[:3] == ["ok"] * 3 and set(codes[3:]) == {"rate_limited"}
    a, b = world.login(ALICE, source="10.1.1.1"), world.login(BOB, source="10.1.1.2")
    world.pair(a, b)


def test_one_identity_is_rate_limited_across_addresses() -> None:
    """An identity gets ``slot_identity_burst`` opens, wherever it connects from."""
    world = World(RelayConfig(slot_identity_burst=2.0, slot_identity_rate=0.001))
    conns = [world.login(ALICE, device=f"d{i}", source=f"10.2.0.{i}") for i in range(3)]
    world.ok(conns[0], w.SlotOpen(world.req()))
    world.ok(conns[1], w.SlotOpen(world.req()))
    assert world.error(conns[2], w.SlotOpen(world.req())) == "rate_limited"


@pytest.mark.parametrize("cap", [2, 4])
def test_one_address_holds_at_most_its_live_slots(cap: int) -> None:
    """Slots opened from one address, joined ones too, stop at ``max_slots_per_source``
    until one closes."""
    world = World(RelayConfig(max_slots_per_source=cap, slot_burst=100.0))
    numbers = []
    for n in range(cap):
        owner, joiner = world.login(Ident(20 + n), source="10.3.3.3"), world.login(Ident(40 + n))
        numbers.append(world.pair(owner, joiner))
        last = owner
    late = world.login(Ident(70), source="10.3.3.3")
    assert world.error(late, w.SlotOpen(world.req())) == "rate_limited"
    world.ok(last, w.SlotClose(world.req(), numbers[-1]))
    world.ok(late, w.SlotOpen(world.req()))


def test_idle_slot_buckets_are_forgotten() -> None:
    """Once full again, the per-address and per-identity slot buckets are dropped."""
    world = World(attrs.evolve(RelayConfig(), slot_rate=1.0, slot_identity_rate=1.0))
    a = world.login(ALICE)
    world.ok(a, w.SlotOpen(world.req()))
    desk = world.core._pairing
    assert len(desk._by_source) == 1 and len(desk._by_identity) == 1
    world.tick(60.0)
    assert len(desk._by_source) == 0 and len(desk._by_identity) == 0


def test_a_frame_decided_again_is_still_paid_but_a_copy_is_not() -> None:
    """A relay node deciding the same decoded join again (after a lost compare-and-set, or a
    refusal checked on fresh state) is not asked to pay twice; a new frame with the same proof
    is."""
    world = World(CONFIG, work=True)
    a, b = world.login(ALICE), world.login(BOB)
    number = _open_paid(world, a)
    work = _ask(world, b, number)
    frame = w.SlotJoin(world.req(), "9999" if number != "9999" else "9998",
                       do_work(work.seed, work.bits))
    text = w.encode_frame(frame)
    for _ in range(2):  # a miss, decided twice: slot_not_found both times, not work_required
        world.apply(world.core.frame_received(b, text, 0.0, frame))
        [error] = world.take(b)
        assert isinstance(error, w.Error) and error.code == "slot_not_found"
    assert world.error(b, text) == "work_required"
