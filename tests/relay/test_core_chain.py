"""The relay keeps each room's membership history: every change carries its member's signed
statement, which the relay checks as members will, appends, pushes and hands out from any index;
a restart (or another node) keeps it."""

from __future__ import annotations

import attrs

from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState
from relay.storage import MemoryStorage, StatementAppended
from tests.relay.harness import ALICE, BOB, CAROL, World, frames_of


def three(world: World) -> tuple[int, int, int]:
    """Alice, Bob and Carol, paired with Alice, joined in room ``abc``."""
    a, b, c = world.login(ALICE), world.login(BOB), world.login(CAROL)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    world.take(a)
    world.pair(a, c)
    world.room_of(a, ALICE, "ac", (c, CAROL))
    world.room_of(a, ALICE, "abc", (b, BOB), (c, CAROL))
    return a, b, c


def test_every_change_is_appended_and_the_history_says_who_is_in() -> None:
    """Create, two invitations, two accepts and a removal: six statements, and the history
    gives the same members as the relay's rows."""
    world = World()
    _, b, _ = three(world)
    world.ok(b, w.Remove(world.req(), "abc", CAROL.fp))
    history = world.history("abc")
    assert history.length == 6
    assert {fp: e.state for fp, e in history.members.items()} == {
        ALICE.fp: "joined", BOB.fp: "joined", CAROL.fp: "left",
    }
    assert [x.index for x in world.writes() if isinstance(x, StatementAppended)] == [5]


def test_a_change_without_a_statement_or_with_someone_elses_is_refused_and_changes_nothing(
) -> None:
    """No statement, one about another change, or one about another room: refused with
    ``bad_statement``, nothing written, nobody told."""
    world = World()
    _, b, c = three(world)
    length = world.history("abc").length
    honest = world.signed(b, w.Remove(world.req(), "abc", CAROL.fp))
    assert isinstance(honest, w.Remove) and honest.stmt is not None
    for frame in (
        attrs.evolve(honest, stmt=None),
        attrs.evolve(honest, fingerprint=ALICE.fp),  # the statement removes carol, not alice
        attrs.evolve(honest, stmt=attrs.evolve(honest.stmt, room="ab")),
        attrs.evolve(honest, stmt=attrs.evolve(honest.stmt, sig=bytes(64))),
    ):
        got = world.raw(b, w.encode_frame(frame))  # as sent: the harness signs nothing here
        assert [f.code for f in got if isinstance(f, w.Error)] == ["bad_statement"]
        assert world.writes() == []
    assert world.history("abc").length == length
    assert not frames_of(world.take(c), w.RoomGone)


def test_a_statement_signed_before_the_history_moved_on_is_stale() -> None:
    """Bob signs a removal of Carol; Alice removes her first: Bob's is ``stale_chain`` (an honest
    client fetches and signs again), and it never enters the history."""
    world = World()
    a, b, _ = three(world)
    bobs = world.signed(b, w.Remove(world.req(), "abc", CAROL.fp))
    world.ok(a, w.Remove(world.req(), "abc", CAROL.fp))
    world.ok(a, w.Add(world.req(), "abc", CAROL.ed_pub, CAROL.x_pub, ALICE.vouch("abc", CAROL)))
    assert world.error(b, bobs) == "stale_chain"
    assert world.history("abc").members[CAROL.fp].state == "invited"


def test_a_push_carries_the_new_statement_and_a_fetch_starts_where_asked() -> None:
    """Members hear each change with its statement (``chain_from`` its index); ``roster
    {have}`` answers with the statements from ``have`` on."""
    world = World()
    a, b, _ = three(world)
    world.take(a)
    world.ok(b, w.Remove(world.req(), "abc", CAROL.fp))
    [push] = [f for f in frames_of(world.take(a), w.Roster) if f.room == "abc"]
    assert isinstance(push, w.Roster)
    assert (push.chain_from, [s.kind for s in push.chain]) == (5, ["remove"])
    [reply] = world.ok(a, w.GetRoster(world.req(), "abc", 3))
    assert isinstance(reply, w.Roster) and reply.chain_from == 3
    assert [s.kind for s in reply.chain] == ["invite", "accept", "remove"]
    full = ChainState.replay("abc", world.ok(a, w.GetRoster(world.req(), "abc", 0))[0].chain)  # type: ignore[union-attr]
    assert full.links == world.history("abc").links


def test_the_history_survives_a_restart() -> None:
    """A relay started again from its storage holds the same history, checked (a statement
    stored is replayed through the rules), and goes on from it."""
    storage = MemoryStorage()
    world = World(storage=storage)
    three(world)
    before = world.history("abc").links
    again = World(storage=storage)
    assert again.history("abc").links == before
    a, b = again.login(ALICE), again.login(BOB)
    again.ok(a, w.Remove(again.req(), "abc", BOB.fp))
    assert again.history("abc").length == len(before) + 1
    del b


def test_a_removed_member_cannot_put_themselves_back() -> None:
    """Carol, removed, accepts again with a statement of her own: refused (``stale_chain``,
    her statement names a head from before her removal, or ``bad_statement`` on the new head:
    she is not invited)."""
    world = World()
    a, b, c = three(world)
    world.ok(a, w.Remove(world.req(), "abc", CAROL.fp))
    history = world.history("abc")
    fresh = CAROL.statement(history, "accept")
    assert world.error(c, w.Accept(world.req(), "abc", fresh)) in ("not_invited", "bad_statement")
    del b
