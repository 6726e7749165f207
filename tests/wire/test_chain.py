"""The membership chain: what a history must be for a member to believe it, and the attacks a
relay could try with statements members really signed (replay, re-adding, forks, reordering)."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk import crypto
from crosstalk.wire.chain import (
    ZERO,
    ChainRefused,
    ChainState,
    Statement,
)
from crosstalk.wire.converter import converter
from tests.wire.chain_helpers import History
from tests.wire.chain_helpers import team as made_team

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
CARL = crypto.Keys(b"\x05" * 32, b"\x06" * 32)
DAVE = crypto.Keys(b"\x07" * 32, b"\x08" * 32)
ROOM = "r1"


def team() -> History:
    """ana creates; ben and carl are invited by ana and accept."""
    return made_team(ROOM, ANA, BEN, CARL)


def states(state: ChainState) -> dict[str, str]:
    return {fp: e.state for fp, e in state.members.items()}


def test_an_honest_history_lists_who_is_in_and_who_has_left() -> None:
    """Create, invite, accept, remove: the derived roster says who is in, and keeps the removed
    member as left (their ops still verify)."""
    h = team()
    h.do(CARL, "remove", BEN)
    assert states(h.state) == {
        ANA.fingerprint: "joined", BEN.fingerprint: "left", CARL.fingerprint: "joined",
    }
    assert h.state.members[BEN.fingerprint].ed_pub == BEN.ed_pub
    assert ChainState.replay(ROOM, h.statements).links == h.state.links


def test_a_replayed_invitation_after_a_removal_is_refused() -> None:
    """The attack of issue 36: the relay shows ben's old invitation again after carl removed
    him. Its signature is good, but it was made before the removal, so nobody believes it."""
    h = team()
    old_invite = h.statements[1]
    h.do(CARL, "remove", BEN)
    with pytest.raises(ChainRefused) as refused:
        h.state.check(old_invite)
    assert refused.value.stale


def test_an_invitation_kept_back_and_shown_after_a_removal_is_refused() -> None:
    """ana signs an invitation of ben that the relay keeps back; ben is invited by carl, joins and
    is removed; the relay then shows ana's old invitation. It names a head from before the
    removal, so it does not count."""
    h = History()
    h.do(ANA, "create")
    h.do(ANA, "invite", CARL)
    h.do(CARL, "accept")
    kept_back = h.make(ANA, "invite", BEN)
    h.do(CARL, "invite", BEN)
    h.do(BEN, "accept")
    h.do(CARL, "remove", BEN)
    with pytest.raises(ChainRefused):
        h.state.check(kept_back)


def test_a_removed_member_comes_back_only_through_an_invitation_made_after_the_removal() -> None:
    """Once removed, ben is back only when someone who saw the removal invites him again."""
    h = team()
    h.do(CARL, "remove", BEN)
    with pytest.raises(ChainRefused):
        h.state.check(h.make(BEN, "accept"))  # ben on his own: not invited
    h.do(ANA, "invite", BEN)
    h.do(BEN, "accept")
    assert states(h.state)[BEN.fingerprint] == "joined"


def test_a_statement_of_a_member_from_before_their_own_removal_is_refused() -> None:
    """ben signed a removal of carl that the relay kept back; after ben is removed it is worth
    nothing (ben is no longer a member), and after ben is back it is stale."""
    h = team()
    kept_back = h.make(BEN, "remove", CARL)
    h.do(ANA, "remove", BEN)
    with pytest.raises(ChainRefused):
        h.state.check(kept_back)
    h.do(ANA, "invite", BEN)
    h.do(BEN, "accept")
    with pytest.raises(ChainRefused) as refused:
        h.state.check(kept_back)
    assert refused.value.stale


def test_a_statement_made_on_another_history_is_refused_as_a_fork() -> None:
    """The relay let ana and carl each sign on a different history; a statement made on the
    other one names a link this history does not have at that index."""
    left, right = team(), team()
    left.do(ANA, "invite", DAVE)
    right.do(CARL, "remove", BEN)
    assert left.state.links[-1] != right.state.links[-1]
    with pytest.raises(ChainRefused, match="fork"):
        left.state.check(right.make(CARL, "invite", DAVE))


def test_concurrent_statements_on_the_same_head_both_apply_in_the_relays_order() -> None:
    """Two members who signed on the same head: the relay orders them and both stand, as long as
    neither is about what the other changed."""
    h = team()
    by_ana = h.make(ANA, "invite", DAVE)
    by_carl = h.make(CARL, "leave")
    h.state.append(by_carl)
    h.state.append(by_ana)
    assert states(h.state)[DAVE.fingerprint] == "invited"
    assert states(h.state)[CARL.fingerprint] == "left"


def test_a_statement_about_someone_changed_since_its_signer_looked_is_stale() -> None:
    """carl removes ben on the head before ben's removal by ana: stale, so an honest carl fetches
    and signs again (and finds nothing left to do)."""
    h = team()
    by_carl = h.make(CARL, "remove", BEN)
    h.do(ANA, "remove", BEN)
    with pytest.raises(ChainRefused) as refused:
        h.state.check(by_carl)
    assert refused.value.hint == "stale_chain"


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(lambda s: attrs.evolve(s, sig=bytes(64)), id="bad-signature"),
        pytest.param(lambda s: attrs.evolve(s, actor=CARL.fingerprint), id="other-actor"),
        pytest.param(lambda s: attrs.evolve(s, room="r2"), id="other-room"),
        pytest.param(lambda s: attrs.evolve(s, after=7), id="after-in-the-future"),
        pytest.param(lambda s: attrs.evolve(s, after_link=ZERO), id="wrong-link"),
        pytest.param(lambda s: attrs.evolve(s, kind="create"), id="second-create"),
        pytest.param(lambda s: attrs.evolve(s, kind="grant"), id="unknown-kind"),
        pytest.param(lambda s: attrs.evolve(s, x_pub=CARL.x_pub), id="swapped-key"),
    ],
)
def test_a_forged_or_altered_invitation_is_refused(forge: object) -> None:
    """Anything a relay changes in a statement someone signed makes it refused."""
    h = team()
    good = h.make(ANA, "invite", DAVE)
    h.state.check(good)
    with pytest.raises(ChainRefused):
        h.state.check(forge(good))  # type: ignore[operator]


@pytest.mark.parametrize(
    ("actor", "kind", "subject"),
    [
        (BEN, "invite", DAVE),  # only invited, not joined yet
        (DAVE, "invite", BEN),  # a stranger
        (ANA, "invite", BEN),  # already invited
        (ANA, "accept", BEN),  # accepting for someone else
        (ANA, "leave", BEN),  # leaving for someone else
        (ANA, "remove", ANA),  # removing oneself
        (ANA, "remove", DAVE),  # not in the room
        (BEN, "leave", BEN),  # never joined
        (ANA, "decline", ANA),  # not invited
    ],
)
def test_changes_the_rules_do_not_allow_are_refused(
    actor: crypto.Keys, kind: str, subject: crypto.Keys
) -> None:
    """Only members invite and remove, only invitees accept and decline, nobody twice."""
    h = History()
    h.do(ANA, "create")
    h.do(ANA, "invite", BEN)
    with pytest.raises(ChainRefused):
        h.state.check(h.make(actor, kind, subject))


def test_the_history_starts_with_its_creation_and_ends_with_its_last_member() -> None:
    """Nothing but a create comes first; nothing comes after the last joined member went."""
    h = History()
    with pytest.raises(ChainRefused):
        h.state.check(h.make(ANA, "invite", BEN))
    h.do(ANA, "create")
    h.do(ANA, "invite", BEN)
    h.do(ANA, "leave")
    assert h.state.ended
    with pytest.raises(ChainRefused):
        h.state.check(h.make(BEN, "accept"))


def test_a_member_who_declines_after_an_earlier_stay_stays_known_by_their_keys() -> None:
    """ben joined, left, was invited again and declined: his keys stay (his old ops verify)."""
    h = team()
    h.do(BEN, "leave")
    h.do(ANA, "invite", BEN)
    h.do(BEN, "decline")
    assert states(h.state)[BEN.fingerprint] == "left"
    h.do(ANA, "invite", DAVE)
    h.do(ANA, "remove", DAVE)  # withdrawn before he ever joined: forgotten
    assert DAVE.fingerprint not in h.state.members


def test_replay_without_signatures_applies_every_other_rule() -> None:
    """Statements this side checked once are replayed without their signatures, never without
    the rules."""
    h = team()
    bad = attrs.evolve(h.make(ANA, "invite", DAVE), sig=bytes(64))
    ChainState.replay(ROOM, [*h.statements, bad], verify=False)
    with pytest.raises(ChainRefused):
        ChainState.replay(ROOM, [*h.statements, bad])
    with pytest.raises(ChainRefused):
        ChainState.replay(ROOM, [*h.statements, h.statements[1]], verify=False)


def test_a_statement_survives_the_wire() -> None:
    """Statements round-trip through the one converter, bytes and all, and still verify."""
    h = team()
    for s in h.statements:
        assert converter.structure(converter.unstructure(s), Statement) == s
    ChainState.replay(
        ROOM, [converter.structure(converter.unstructure(s), Statement) for s in h.statements]
    )


PEOPLE = [ANA, BEN, CARL, DAVE]


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(
    ["invite", "accept", "decline", "leave", "remove"]), st.integers(0, 3)), max_size=30),
    st.data())
def test_no_replayed_statement_is_ever_believed_twice(
    moves: list[tuple[int, str, int]], data: st.DataObject
) -> None:
    """Build a random honest history, then try every statement of it again at the end: none is
    accepted (a relay can show nothing twice), and the state is what the honest moves made."""
    h = History()
    h.do(ANA, "create")
    for actor, kind, subject in moves:
        candidate = h.make(PEOPLE[actor], kind, PEOPLE[subject])
        try:
            h.state.check(candidate)
        except ChainRefused:
            continue
        h.do(PEOPLE[actor], kind, PEOPLE[subject])
        if h.state.ended:
            break
    replayed = data.draw(st.sampled_from(h.statements))
    with pytest.raises(ChainRefused):
        h.state.check(replayed)
    again = ChainState.replay(ROOM, h.statements)
    assert again.links == h.state.links and again.members == h.state.members
