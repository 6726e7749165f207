"""Room membership rules in the relay core."""

from __future__ import annotations

import pytest

from crosstalk.wire import relay as w
from relay import rooms
from tests.relay.harness import ALICE, BOB, CAROL, MALLORY, World, frames_of


def _two(world: World) -> tuple[int, int]:
    """Alice and Bob, paired, in room "ab"."""
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    world.take(a)
    world.take(b)
    return a, b


def test_create_makes_creator_the_only_joined_member() -> None:
    """A new room's roster is its creator, joined, self-signed."""
    world = World()
    a = world.login(ALICE)
    got = world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    [roster] = frames_of(got, w.Roster)
    assert isinstance(roster, w.Roster)
    assert [(m.fingerprint, m.state, m.added_by) for m in roster.members] == [
        (ALICE.fp, "joined", ALICE.fp)
    ]


def test_create_of_existing_id_is_room_exists() -> None:
    """Room ids are unique."""
    world = World()
    a, m = world.login(ALICE), world.login(MALLORY)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    again = w.Create(world.req(), "r1", MALLORY.vouch("r1", MALLORY))
    assert world.error(m, again) == "room_exists"


def test_create_with_bad_self_signature_is_forbidden() -> None:
    """The creator's roster entry must carry its own valid signature."""
    world = World()
    a = world.login(ALICE)
    assert world.error(a, w.Create(world.req(), "r1", BOB.vouch("r1", ALICE))) == "forbidden"


def test_add_needs_a_shared_room_or_a_pairing() -> None:
    """A member cannot invite a stranger; after pairing they can, once."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    add = w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB))
    assert world.error(a, add) == "forbidden"
    world.pair(a, b)
    world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    world.ok(a, w.Create(world.req(), "r2", ALICE.vouch("r2", ALICE)))
    again = w.Add(world.req(), "r2", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r2", BOB))
    assert world.error(a, again) == "forbidden"  # the grant is spent; Bob has not joined r1


def test_add_requires_joined_membership() -> None:
    """Someone outside a room cannot add to it."""
    world = World()
    a, m = world.login(ALICE), world.login(MALLORY)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    add = w.Add(world.req(), "r1", MALLORY.ed_pub, MALLORY.x_pub, MALLORY.vouch("r1", MALLORY))
    assert world.error(m, add) == "not_a_member"


def test_add_with_signature_by_someone_else_is_forbidden() -> None:
    """The roster entry must be signed by the adder."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    add = w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, BOB.vouch("r1", BOB))
    assert world.error(a, add) == "forbidden"


def test_invitation_reaches_invitee_and_roster_shows_invited() -> None:
    """The invitee's devices get invited; the joined members see the new entry."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    got = world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    [roster] = frames_of(got, w.Roster)
    assert isinstance(roster, w.Roster)
    entry = next(m for m in roster.members if m.fingerprint == BOB.fp)
    assert (entry.state, entry.added_by, entry.ed_pub) == ("invited", ALICE.fp, BOB.ed_pub)
    assert world.take(b) == [w.Invited("r1", ALICE.fp)]


def test_already_member_cannot_be_added_twice() -> None:
    """Adding someone in the roster is already_member."""
    world = World()
    a, _ = _two(world)
    add = w.Add(world.req(), "ab", BOB.ed_pub, BOB.x_pub, ALICE.vouch("ab", BOB))
    assert world.error(a, add) == "already_member"


def test_accept_and_decline_need_an_invitation() -> None:
    """Accept or decline without an invitation is not_invited."""
    world = World()
    a, m = world.login(ALICE), world.login(MALLORY)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    assert world.error(m, w.Accept(world.req(), "r1")) == "not_invited"
    assert world.error(m, w.Decline(world.req(), "r1")) == "not_invited"
    assert world.error(a, w.Accept(world.req(), "r1")) == "not_invited"


def test_decline_removes_the_invitation() -> None:
    """After decline the invitee is out of the roster and cannot accept."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    world.ok(b, w.Decline(world.req(), "r1"))
    [pushed] = frames_of(world.take(a), w.Roster)
    assert isinstance(pushed, w.Roster) and pushed.members == []  # bob's row went
    assert [(s.kind, s.subject) for s in pushed.chain] == [("decline", BOB.fp)]
    [roster] = world.ok(a, w.GetRoster(world.req(), "r1"))
    assert isinstance(roster, w.Roster) and [m.fingerprint for m in roster.members] == [ALICE.fp]
    assert world.error(b, w.Accept(world.req(), "r1")) == "not_invited"


def test_invited_member_gets_nothing_of_the_room_until_accepting() -> None:
    """No ops or roster pushes reach an invitee; after accept they do."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    world.take(b)
    world.ok(a, w.Post(world.req(), "r1", "op1", b"sealed"))
    assert world.take(b) == []
    assert world.error(b, w.Post(world.req(), "r1", "op2", b"x")) == "not_a_member"
    world.ok(b, w.Accept(world.req(), "r1"))
    world.ok(a, w.Post(world.req(), "r1", "op3", b"sealed3"))
    ops = frames_of(world.take(b), w.Op)
    assert [o.op_id for o in ops if isinstance(o, w.Op)] == ["op3"]


def test_any_member_may_remove_another_who_then_loses_access() -> None:
    """Removal pushes room_gone to the removed, the roster to the rest, and closes the door."""
    world = World()
    a, b = _two(world)
    world.ok(b, w.Remove(world.req(), "ab", ALICE.fp))  # no owner: Bob removes the creator
    assert w.RoomGone("ab", "removed", BOB.fp) in world.take(a)  # says who removed them
    assert world.error(a, w.Post(world.req(), "ab", "x", b"x")) == "not_a_member"
    assert world.error(a, w.GetRoster(world.req(), "ab")) == "not_a_member"
    assert world.error(b, w.Remove(world.req(), "ab", BOB.fp)) == "bad_frame"


def test_remove_of_non_member_is_not_a_member() -> None:
    """Removing someone not in the roster fails."""
    world = World()
    a, _ = _two(world)
    assert world.error(a, w.Remove(world.req(), "ab", CAROL.fp)) == "not_a_member"


def test_last_leave_deletes_room_and_its_log() -> None:
    """When the last joined member leaves, room, roster and log are gone, also from storage."""
    world = World()
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o1", b"x"))
    world.ok(a, w.Leave(world.req(), "ab"))
    assert world.core.statistics().rooms == 1
    world.ok(b, w.Leave(world.req(), "ab"))
    assert world.core.statistics().rooms == 0
    assert world.core.statistics().held_ops == 0
    assert world.storage.load().rooms == []
    assert world.error(b, w.GetRoster(world.req(), "ab")) == "unknown_room"


def test_room_dies_with_last_joined_member_even_with_pending_invitations() -> None:
    """Invitees of a room nobody is joined to are told it is gone."""
    world = World()
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.ok(a, w.Create(world.req(), "r1", ALICE.vouch("r1", ALICE)))
    world.ok(a, w.Add(world.req(), "r1", BOB.ed_pub, BOB.x_pub, ALICE.vouch("r1", BOB)))
    world.take(b)
    world.ok(a, w.Leave(world.req(), "r1"))
    assert world.take(b) == [w.RoomGone("r1", "deleted")]
    assert world.core.statistics().rooms == 0


def test_roster_and_rooms_list_only_for_members() -> None:
    """A stranger cannot read a roster; rooms lists only your own rooms."""
    world = World()
    _, b = _two(world)
    m = world.login(MALLORY)
    assert world.error(m, w.GetRoster(world.req(), "ab")) == "not_a_member"
    assert world.error(m, w.GetRoster(world.req(), "zz")) == "unknown_room"
    [listing] = world.ok(m, w.ListRooms(world.req()))
    assert isinstance(listing, w.RoomList) and listing.rooms == []
    [listing] = world.ok(b, w.ListRooms(world.req()))
    assert isinstance(listing, w.RoomList) and listing.rooms == [w.RoomEntry("ab", "joined")]


def test_shared_room_allows_adding_to_another_room() -> None:
    """Once Alice and Bob share a joined room, either can add the other elsewhere."""
    world = World()
    a, b = _two(world)
    world.ok(b, w.Create(world.req(), "b2", BOB.vouch("b2", BOB)))
    world.ok(b, w.Add(world.req(), "b2", ALICE.ed_pub, ALICE.x_pub, BOB.vouch("b2", ALICE)))
    assert w.Invited("b2", BOB.fp) in world.take(a)


def _three(world: World) -> tuple[int, int, int]:
    """Alice, Bob and Carol, paired with Alice, joined in room "abc"."""
    a, b, c = world.login(ALICE), world.login(BOB), world.login(CAROL)
    world.pair(a, b)
    world.pair(a, c)
    world.room_of(a, ALICE, "abc", (b, BOB), (c, CAROL))
    for conn in (a, b, c):
        world.take(conn)
    return a, b, c


def _fetch(world: World, conn: int, room: str) -> w.Roster:
    """The roster ``roster {room}`` answers (pushes received before it are passed over)."""
    world.take(conn)
    req = world.req()
    [reply] = [f for f in world.ok(conn, w.GetRoster(req, room))
               if isinstance(f, w.Roster) and f.req == req]
    assert isinstance(reply, w.Roster)
    return reply


def _states(roster: w.RelayFrame) -> dict[str, str]:
    assert isinstance(roster, w.Roster)
    return {m.fingerprint: m.state for m in roster.members}


def test_a_member_who_leaves_stays_in_the_roster_as_left_and_survives_a_restart() -> None:
    """Someone who joined and left while another member was away signed ops that member must
    still verify (sim seed 311): their signed entry stays, as ``left``, granting nothing."""
    world = World()
    _, b, c = _three(world)
    world.ok(c, w.Leave(world.req(), "abc"))
    [pushed] = frames_of(world.take(b), w.Roster)
    assert _states(pushed) == {CAROL.fp: "left"}  # a push carries the rows its change names
    assert isinstance(pushed, w.Roster)
    carol = next(m for m in pushed.members if m.fingerprint == CAROL.fp)
    assert carol.added_by == ALICE.fp and carol.sig == ALICE.vouch("abc", CAROL)
    assert world.error(c, w.Post(world.req(), "abc", "x", b"x")) == "not_a_member"
    assert world.error(c, w.GetRoster(world.req(), "abc")) == "not_a_member"
    [listing] = world.ok(c, w.ListRooms(world.req()))
    assert isinstance(listing, w.RoomList) and listing.rooms == []
    again = World(storage=world.storage)  # a restarted relay loads the same roster
    b2 = again.login(BOB)
    everyone = {ALICE.fp: "joined", BOB.fp: "joined", CAROL.fp: "left"}
    assert _states(_fetch(world, b, "abc")) == everyone
    assert _states(_fetch(again, b2, "abc")) == everyone


def test_a_departed_member_added_again_is_invited_not_left() -> None:
    world = World()
    a, b, c = _three(world)
    world.ok(b, w.Remove(world.req(), "abc", CAROL.fp))
    world.take(a)
    world.pair(a, c)  # they share no room now: a new pairing grants the add
    world.ok(a, w.Add(world.req(), "abc", CAROL.ed_pub, CAROL.x_pub, ALICE.vouch("abc", CAROL)))
    roster = _fetch(world, a, "abc")
    assert _states(roster)[CAROL.fp] == "invited"
    assert [m.fingerprint for m in roster.members].count(CAROL.fp) == 1


def test_an_invitation_declined_leaves_no_departed_entry() -> None:
    """Only someone who was joined signed ops in the room: a declined invitee is forgotten."""
    world = World()
    a, _ = _two(world)
    c = world.login(CAROL)
    world.pair(a, c)
    world.ok(a, w.Add(world.req(), "ab", CAROL.ed_pub, CAROL.x_pub, ALICE.vouch("ab", CAROL)))
    world.ok(c, w.Decline(world.req(), "ab"))
    assert CAROL.fp not in _states(_fetch(world, a, "ab"))


def test_departed_entries_are_bounded_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_DEPARTED the oldest departed entry goes, from the roster and from storage."""
    monkeypatch.setattr(rooms, "MAX_DEPARTED", 1)
    world = World()
    a, b, c = _three(world)
    world.ok(c, w.Leave(world.req(), "abc"))
    world.ok(b, w.Leave(world.req(), "abc"))
    assert _states(_fetch(world, a, "abc")) == {ALICE.fp: "joined", BOB.fp: "left"}
    [record] = world.storage.load().rooms
    assert sorted(m.fingerprint for m in record.members) == sorted([ALICE.fp, BOB.fp])
