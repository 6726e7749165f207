"""Pairing limits in the relay core: open slots only (finding 8), and guesses never block a
right code for a slot that exists (finding 3)."""

from __future__ import annotations

from crosstalk.wire import relay as w
from relay.admission import tunnel_source
from relay.http import RequestHead
from relay.limits import RelayConfig
from tests.relay.harness import ALICE, BOB, MALLORY, Ident, World


def open_slot(world: World, conn: int) -> str:
    [slot] = [f for f in world.ok(conn, w.SlotOpen(world.req())) if isinstance(f, w.Slot)]
    assert isinstance(slot, w.Slot)
    return slot.slot


def test_finished_pairings_do_not_count_against_the_open_slot_limit() -> None:
    """Four pairings within 15 minutes: the fourth room new is not refused."""
    world = World(RelayConfig(max_open_slots=3))
    a = world.login(ALICE)
    numbers = []
    for seed in range(20, 24):  # four pairings, each joined and left to expire
        joiner = world.login(Ident(seed))
        numbers.append(open_slot(world, a))
        world.ok(joiner, w.SlotJoin(world.req(), numbers[-1]))
    assert len(set(numbers)) == 4


def test_slots_still_waiting_for_a_joiner_are_capped() -> None:
    """Three slots nobody joined yet: the fourth open is rate_limited."""
    world = World(RelayConfig(max_open_slots=3))
    a = world.login(ALICE)
    for _ in range(3):
        open_slot(world, a)
    assert world.error(a, w.SlotOpen(world.req())) == "rate_limited"


def test_strangers_guessing_behind_one_address_never_block_the_right_code() -> None:
    """20 misses from 127.0.0.1 (every client behind a tunnel), then a join at a real slot
    from the same address succeeds; further misses are still rate_limited."""
    world = World(RelayConfig(guess_burst=20.0, guess_rate=1 / 3))
    owner = world.login(ALICE, source="127.0.0.1")
    number = open_slot(world, owner)
    stranger = world.login(MALLORY, source="127.0.0.1")
    misses = [f"{n:04d}" for n in range(40) if f"{n:04d}" != number]
    codes = [world.error(stranger, w.SlotJoin(world.req(), n)) for n in misses[:21]]
    assert codes[:20] == ["slot_not_found"] * 20 and codes[20] == "rate_limited"
    joiner = world.login(BOB, source="127.0.0.1")
    [joined] = world.ok(joiner, w.SlotJoin(world.req(), number))
    assert isinstance(joined, w.SlotJoined) and joined.fingerprint == ALICE.fp
    assert world.error(stranger, w.SlotJoin(world.req(), misses[25])) == "rate_limited"


def test_the_tunnel_address_is_trusted_only_from_a_loopback_peer_when_enabled() -> None:
    """Cf-Connecting-Ip names the client only behind our own tunnel (loopback, enabled)."""
    head = RequestHead("GET", "/ws", {"cf-connecting-ip": "203.0.113.7, 10.0.0.1"})
    assert tunnel_source(head, "127.0.0.1", "Cf-Connecting-Ip") == "203.0.113.7"
    assert tunnel_source(head, "::1", "Cf-Connecting-Ip") == "203.0.113.7"
    assert tunnel_source(head, "198.51.100.2", "Cf-Connecting-Ip") == "198.51.100.2"
    assert tunnel_source(head, "127.0.0.1", None) == "127.0.0.1"
    forged = RequestHead("GET", "/ws", {"cf-connecting-ip": "not an address"})
    assert tunnel_source(forged, "127.0.0.1", "Cf-Connecting-Ip") == "127.0.0.1"
