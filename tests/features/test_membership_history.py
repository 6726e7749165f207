"""A member's roster comes from the room's signed membership history, whatever the relay's rows
say: the relay as an adversary (re-adding a removed member, replaying, forking, withholding)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import pytest

from crosstalk import crypto
from crosstalk.core.members import KnownMember
from crosstalk.features.membership.core import HistoryChange, apply_history, reconcile
from crosstalk.wire import relay as w
from crosstalk.wire.chain import ChainState, Statement
from tests.wire.chain_helpers import History
from tests.wire.chain_helpers import team as made_team

ANA = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
BEN = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
CARL = crypto.Keys(b"\x05" * 32, b"\x06" * 32)
ROOM = "r1"
TRUSTED = {k.fingerprint: (k.ed_pub, k.x_pub) for k in (ANA, BEN, CARL)}


def row(keys: crypto.Keys, state: str) -> w.Member:
    """The relay's row for ``keys``, signed by ana the old way (a relay can keep such rows)."""
    sig = crypto.sign(ANA, w.member_transcript(ROOM, keys.ed_pub, keys.x_pub))
    return w.Member(keys.fingerprint, keys.ed_pub, keys.x_pub, state, ANA.fingerprint, sig)


def team() -> History:
    """ana creates; ben and carl are invited by ana and accept."""
    return made_team(ROOM, ANA, BEN, CARL)


def carl_sees(held: Sequence[Statement], start: int, offered: Sequence[Statement],
              rows: Sequence[w.Member], local: Sequence[KnownMember] = ()) -> HistoryChange:
    return apply_history(ROOM, held, start, offered, rows, local, TRUSTED)


def members(change: HistoryChange) -> dict[str, str]:
    assert change.change is not None
    return {r.fingerprint: r.state for r in change.change.rows if not r.gone}


def test_the_roster_is_the_historys_and_a_removal_makes_the_member_gone() -> None:
    """An honest relay: the history's roster, with ben gone after carl removed him."""
    h = team()
    first = carl_sees([], 0, h.statements, [row(ANA, "joined"), row(BEN, "joined"),
                                             row(CARL, "joined")])
    assert first.alarm is None and len(first.added) == 5
    assert members(first) == {k.fingerprint: "member" for k in (ANA, BEN, CARL)}
    h.do(CARL, "remove", BEN)
    after = carl_sees(h.statements[:5], 5, h.statements[5:],
                      [row(ANA, "joined"), row(CARL, "joined"), row(BEN, "left")],
                      first.change.rows if first.change else ())
    assert after.alarm is None
    assert members(after) == {ANA.fingerprint: "member", CARL.fingerprint: "member"}
    assert after.change is not None and after.change.gone == (BEN.fingerprint,)


def test_a_relay_that_lists_a_removed_member_again_gets_them_nowhere() -> None:
    """Issue 36's attack: after the removal the relay flips ben's row back to joined (its old
    signature still verifies). The history says removed: ben is not a member, and the person
    is told the relay lists someone the history does not."""
    h = team()
    h.do(CARL, "remove", BEN)
    lying_rows = [row(ANA, "joined"), row(BEN, "joined"), row(CARL, "joined")]
    got = carl_sees(h.statements, 6, [], lying_rows)
    assert BEN.fingerprint not in members(got)
    assert got.alarm is not None and BEN.fingerprint[:9] in got.alarm


def test_planted_bug_trusting_the_relays_rows_lets_the_removed_member_back() -> None:
    """The check can fail: a roster taken from the relay's rows (whose old adder signatures
    still verify) lists ben again on the same lying rows, so the test above would see him."""
    lying_rows = [row(ANA, "joined"), row(BEN, "joined"), row(CARL, "joined")]
    old = reconcile([], lying_rows)
    assert any(r.fingerprint == BEN.fingerprint and not r.gone for r in old.rows)


def test_a_replayed_invitation_is_refused_and_reported() -> None:
    """The relay offers ben's old invitation again as the next statement: refused, nothing is
    added, the roster stays the history's, and the person is told."""
    h = team()
    h.do(CARL, "remove", BEN)
    got = carl_sees(h.statements, 6, [h.statements[1]], [])
    assert got.added == () and got.alarm is not None and "does not verify" in got.alarm
    assert BEN.fingerprint not in members(got)


def test_another_history_at_an_index_we_hold_is_a_fork() -> None:
    """The relay shows us a different statement where we already hold one: a fork, reported;
    nothing after it is taken."""
    h = team()
    other = team()
    other.statements[4] = other.make(ANA, "invite", BEN)  # anything but what we hold
    got = carl_sees(h.statements, 3, other.statements[3:], [])
    assert got.added == () and got.alarm is not None and "another membership history" in got.alarm


def test_a_push_past_what_we_hold_says_behind_and_adds_nothing_out_of_order() -> None:
    """A push of statement 6 to someone holding 5: a gap; the rest comes with a fetch."""
    h = team()
    h.do(ANA, "invite", BEN.__class__(b"\x07" * 32, b"\x08" * 32))
    h.do(CARL, "leave")
    got = carl_sees(h.statements[:5], 6, h.statements[6:], [])
    assert got.behind and got.added == () and got.alarm is None


def test_a_history_that_gives_a_contact_other_keys_is_reported_and_left_out() -> None:
    """A member signs an invitation of ben with another X25519 key: ben's real key is ours to
    know, so the entry is left out (no key is ever sealed to the swapped one)."""
    h = History(ROOM)
    h.do(ANA, "create")
    fake = attrs.evolve(BEN, x_secret=b"\x09" * 32)
    h.do(ANA, "invite", fake)
    got = carl_sees([], 0, h.statements, [])
    assert got.alarm is not None and "other keys" in got.alarm
    assert BEN.fingerprint not in members(got)


@pytest.mark.parametrize("rows_lie", [False, True])
def test_rows_are_compared_once_caught_up_never_while_behind(rows_lie: bool) -> None:
    """While we are behind, the relay's rows may be newer than our history: no alarm then.
    Caught up, rows that list a stranger are reported, honest rows are not."""
    h = team()
    rows = [row(ANA, "joined"), row(BEN, "joined"), row(CARL, "joined")]
    if rows_lie:
        rows.append(row(crypto.Keys(b"\x0b" * 32, b"\x0c" * 32), "joined"))
    behind = carl_sees(h.statements[:3], 4, h.statements[4:], rows)
    assert behind.behind and behind.alarm is None
    caught_up = carl_sees([], 0, h.statements, rows)
    assert not caught_up.behind
    assert (caught_up.alarm is not None) == rows_lie


def test_the_history_says_when_we_are_out_whatever_the_rows_say() -> None:
    """Ben removed by carl: out, removed by carl, even with rows listing him joined (he would
    only name himself); invited again after it: in; behind the relay: no conclusion yet."""
    h = team()
    h.do(CARL, "remove", BEN)
    rows = [row(ANA, "joined"), row(BEN, "joined"), row(CARL, "joined")]
    out = apply_history(ROOM, [], 0, h.statements, rows, [], TRUSTED, BEN.fingerprint)
    assert out.out and out.removed_by == CARL.fingerprint
    behind = apply_history(ROOM, h.statements[:3], 4, h.statements[4:], rows, [], TRUSTED,
                           BEN.fingerprint)
    assert behind.behind and not behind.out
    h.do(ANA, "invite", BEN)
    back = apply_history(ROOM, h.statements[:6], 6, h.statements[6:], rows, [], TRUSTED,
                         BEN.fingerprint)
    assert not back.out
    h.do(BEN, "accept")
    h.do(BEN, "leave")
    left = apply_history(ROOM, h.statements, len(h.statements), [], rows, [], TRUSTED,
                         BEN.fingerprint)
    assert left.out and left.removed_by is None


def test_a_history_already_replayed_gives_what_replaying_it_gives() -> None:
    """The actor hands over its cached chain state: the result is the replay's, and the state
    is extended in place with what was added."""
    h = team()
    h.do(CARL, "remove", BEN)
    rows = [row(ANA, "joined"), row(CARL, "joined"), row(BEN, "left")]
    held = h.statements[:5]
    state = ChainState.replay(ROOM, held, verify=False)
    cached = apply_history(ROOM, held, 5, h.statements[5:], rows, (), TRUSTED, state=state)
    assert cached == carl_sees(held, 5, h.statements[5:], rows)
    assert state.links == h.state.links
