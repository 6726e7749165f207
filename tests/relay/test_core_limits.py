"""The limits a stranger with free identities cannot get around, in the relay core:
authenticated connections per address and identity, slot rates, and what a throwaway leaves."""

from __future__ import annotations

import attrs
import pytest

from crosstalk.wire import relay as w
from relay.crowd import Crowd, CrowdLimits
from relay.limits import RelayConfig, source_key
from relay.storage import DevicePut
from tests.relay.harness import ALICE, BOB, CAROL, Ident, World

# Plenty of slot actions, so that tests of connections are not about slot rates.
ROOMY = RelayConfig(slot_burst=1000.0, slot_identity_burst=1000.0, guess_burst=1000.0)


class NewestFirst(Crowd):
    """Planted bug: shed the connection that just arrived instead of the idlest."""

    def arrived(self, conn: int, source: str, fp: str) -> list[int]:
        return [conn] if super().arrived(conn, source, fp) else []


def _idlest_goes(crowd_cls: type[Crowd]) -> bool:
    """Three connections of one identity at a cap of two, the first kept busy: is the second
    (the idlest) the one shed, leaving the busy one and the newcomer?"""
    crowd = crowd_cls(CrowdLimits(max_per_source=10, max_per_identity=2, max_authenticated=10))
    crowd.arrived(1, "a", "me")
    crowd.arrived(2, "a", "me")
    crowd.active(1)
    return crowd.arrived(3, "a", "me") == [2]


@pytest.mark.parametrize(("crowd_cls", "holds"), [(Crowd, True), (NewestFirst, False)])
def test_identity_over_its_cap_loses_its_idlest_connection(crowd_cls: type[Crowd],
                                                          holds: bool) -> None:
    """Past the identity cap the idlest connection goes, not the newcomer (a planted crowd
    that sheds the newest fails the same check)."""
    assert _idlest_goes(crowd_cls) is holds


def test_one_address_over_its_cap_sheds_only_its_own() -> None:
    """A flood from one address sheds that address's idlest; another address keeps all."""
    crowd = Crowd(CrowdLimits(max_per_source=3, max_per_identity=100, max_authenticated=100))
    crowd.arrived(100, "honest", "h")
    shed: list[int] = []
    for conn in range(1, 11):
        shed += crowd.arrived(conn, "flood", f"throwaway-{conn}")
    assert shed == list(range(1, 8)) and len(crowd) == 4


def test_the_total_cap_sheds_from_the_address_holding_most() -> None:
    """At the total, the busiest address pays: its idlest goes, the small one keeps its own."""
    crowd = Crowd(CrowdLimits(max_per_source=100, max_per_identity=100, max_authenticated=5))
    crowd.arrived(1, "small", "s")
    for conn in range(2, 6):
        crowd.arrived(conn, "big", f"b{conn}")
    assert crowd.arrived(6, "small", "s2") == [2]
    assert crowd.arrived(7, "other", "o") == [3]


def test_the_crowd_forgets_every_key_once_all_have_left() -> None:
    """No entry is left per address or identity after a flood's connections close."""
    crowd = Crowd(CrowdLimits(max_per_source=5, max_per_identity=5, max_authenticated=50))
    for conn in range(40):
        for gone in crowd.arrived(conn, f"s{conn % 7}", f"id{conn}"):
            crowd.left(gone)
    for conn in range(40):
        crowd.left(conn)
    assert len(crowd) == 0 and crowd.sources() == 0 and not crowd._by_identity


def test_an_ipv6_address_counts_by_its_64() -> None:
    """Addresses of one /64 are one source; IPv4 (and IPv4-mapped) stay as they are."""
    assert source_key("2001:db8:1:2::5") == source_key("2001:db8:1:2:ffff::9")
    assert source_key("2001:db8:1:3::5") != source_key("2001:db8:1:2::5")
    assert source_key("::ffff:10.0.0.1") == "10.0.0.1" == source_key("10.0.0.1")
    assert source_key("unknown") == "unknown"


def test_core_closes_the_idlest_connection_of_an_address_past_its_cap() -> None:
    """The core closes the idlest authenticated connection of an address past the cap; the
    newcomer and other addresses' connections stay."""
    world = World(attrs.evolve(ROOMY, max_per_source=2))
    first = world.login(ALICE, source="10.0.0.9")
    second = world.login(BOB, source="10.0.0.9")
    other = world.login(Ident(50), source="10.0.0.10")
    world.ok(first, w.ListRooms(world.req()))  # first is busy; second is now the idlest
    third = world.login(CAROL, source="10.0.0.9")
    assert world.closed == [second]
    assert {first, third, other}.isdisjoint(world.closed)


def test_one_identity_cannot_hold_more_than_its_cap() -> None:
    """An identity's connections beyond its cap are shed, its idlest first."""
    world = World(attrs.evolve(ROOMY, max_per_identity=3))
    conns = [world.login(ALICE, device=f"d{i}", source=f"10.0.1.{i}") for i in range(5)]
    assert world.closed == conns[:2]


def test_a_throwaway_identity_leaves_no_device_behind() -> None:
    """A hello from an identity in no room writes nothing and keeps nothing once it closes."""
    world = World()
    conn = world.login(Ident(60), resume=False)
    assert not [e for e in world.storage.load().devices]
    world.close(conn)
    world.tick(10_000.0)
    assert world.core._rooms.devices == {}
    assert world.core.identities() == set() and len(world.core._crowd) == 0


def test_creating_a_room_stores_the_devices_of_the_identity() -> None:
    """A stranger's device is stored when it creates a room, for each of its connections."""
    world = World()
    a1 = world.login(ALICE, device="laptop")
    world.login(ALICE, device="desktop")
    world.ok(a1, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    stored = {(d.fingerprint, d.device) for d in world.storage.load().devices}
    assert stored == {(ALICE.fp, "laptop"), (ALICE.fp, "desktop")}
    cursors = {(c.device, c.room) for c in world.storage.load().cursors}
    assert cursors == {("laptop", "r1"), ("desktop", "r1")}


def test_accepting_an_invitation_received_while_connected_stores_the_device() -> None:
    """An identity invited after its hello gets its device and cursor at its accept."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB, device="phone")
    world.pair(a, b)
    world.room_of(a, ALICE, "r1", (b, BOB))
    assert (BOB.fp, "phone") in {(d.fingerprint, d.device) for d in world.storage.load().devices}
    assert any(c.fingerprint == BOB.fp and c.room == "r1" for c in world.storage.load().cursors)


def test_a_refused_create_writes_no_device() -> None:
    """Create refused (room exists): nothing is written, the device either."""
    world = World()
    a = world.login(ALICE)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    b = world.login(BOB)
    assert world.error(b, w.Create(world.req(), "r1", BOB.vouch("r1", BOB))) == "room_exists"
    assert not any(isinstance(e, DevicePut) for e in world.writes())
