"""The membership rules: how a local roster follows the roster a verified history gives, and
members' names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk import crypto
from crosstalk.core.members import BY_ADDER, BY_SELF, PLACEHOLDER, KnownMember
from crosstalk.features.membership.core import (
    MAX_LABEL,
    clean_label,
    name_member,
    placeholder_label,
    reconcile,
)
from crosstalk.wire.relay import Member, member_transcript

ROOM = "room-1"
ANA, BEN, CY, DAN, EVE = (crypto.Keys(bytes([i]) * 32, bytes([i + 100]) * 32) for i in range(1, 6))


def entry(who: crypto.Keys, by: crypto.Keys, state: str = "joined", room: str = ROOM) -> Member:
    """A roster entry for ``who``, signed by ``by`` as the relay stores it."""
    sig = crypto.sign(by, member_transcript(room, who.ed_pub, who.x_pub))
    return Member(who.fingerprint, who.ed_pub, who.x_pub, state, by.fingerprint, sig)  # type: ignore[arg-type]


def known(who: crypto.Keys, label: str, **kw: object) -> KnownMember:
    return KnownMember(who.fingerprint, label, who.ed_pub, who.x_pub, **kw)  # type: ignore[arg-type]


def test_reconcile_adds_joiners_marks_leavers_gone_and_keeps_their_keys() -> None:
    """cy joins (named by placeholder until someone names them); ben left: gone, keys kept."""
    local = [known(ANA, "ana"), known(BEN, "ben")]
    change = reconcile(local, [entry(ANA, ANA), entry(CY, ANA)])
    rows = {r.fingerprint: r for r in change.rows}
    assert change.joined == (CY.fingerprint,)
    assert change.gone == (BEN.fingerprint,)
    assert rows[BEN.fingerprint].gone and rows[BEN.fingerprint].ed_pub == BEN.ed_pub
    assert rows[CY.fingerprint].label == placeholder_label(CY.fingerprint)
    assert rows[CY.fingerprint].named == PLACEHOLDER
    assert rows[ANA.fingerprint].label == "ana"


def test_reconcile_turns_an_invitation_into_a_member_and_keeps_its_name() -> None:
    """An invited member who accepted becomes a member; the name we had stays."""
    local = [known(ANA, "ana"), known(CY, "cy", state="invited")]
    before = reconcile(local, [entry(ANA, ANA), entry(CY, ANA, "invited")])
    assert before.joined == () and not before.changed
    after = reconcile(local, [entry(ANA, ANA), entry(CY, ANA)])
    row = next(r for r in after.rows if r.fingerprint == CY.fingerprint)
    assert (row.state, row.label, after.joined) == ("member", "cy", (CY.fingerprint,))


def test_a_member_who_comes_back_is_live_again() -> None:
    """A gone row that the relay lists again (re-invited) is no longer gone."""
    local = [known(ANA, "ana"), known(BEN, "ben", gone=True)]
    change = reconcile(local, [entry(ANA, ANA), entry(BEN, ANA)])
    assert not next(r for r in change.rows if r.fingerprint == BEN.fingerprint).gone
    assert change.joined == (BEN.fingerprint,)


def test_someone_who_came_and_went_while_we_were_away_is_kept_gone_with_their_keys() -> None:
    """cy joined and left while ana was away (sim seed 311): the relay lists cy as left; cy is
    added gone, with the keys ana needs to verify cy's ops, and is neither joined nor gone news.
    """
    local = [known(ANA, "ana"), known(BEN, "ben")]
    roster = [entry(ANA, ANA), entry(BEN, ANA), entry(CY, BEN, "left")]
    change = reconcile(local, roster)
    rows = {r.fingerprint: r for r in change.rows}
    cy = rows[CY.fingerprint]
    assert (cy.gone, cy.state, cy.ed_pub, cy.added_by) == (
        True, "member", CY.ed_pub, BEN.fingerprint
    )
    assert (change.joined, change.gone) == ((), ())


def test_a_member_the_relay_lists_as_left_is_gone() -> None:
    """A live member listed as left is gone (as if the relay had left them out), keys kept."""
    local = [known(ANA, "ana"), known(BEN, "ben")]
    change = reconcile(local, [entry(ANA, ANA), entry(BEN, ANA, "left")])
    ben = next(r for r in change.rows if r.fingerprint == BEN.fingerprint)
    assert ben.gone and ben.label == "ben" and change.gone == (BEN.fingerprint,)
    again = reconcile(change.rows, [entry(ANA, ANA), entry(BEN, ANA, "left")])
    assert again.gone == () and not again.changed


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("carl", "carl"),
        ("  carl\t smith ", "carl smith"),
        ("ana/laptop", "ana-laptop"),
        ("#r3", "-r3"),
        ("bell\x07\x1b[31m", "bell[31m"),
        ("rtl\u202eevil", "rtlevil"),
        ("\x00\n", ""),
        ("x" * 500, "x" * MAX_LABEL),
    ],
)
def test_clean_label(raw: str, clean: str) -> None:
    """Control and format characters go; address syntax is defused; length is capped."""
    assert clean_label(raw) == clean


@given(st.text())
def test_clean_label_never_yields_address_syntax_or_controls(raw: str) -> None:
    """Whatever a peer sends, the name is printable, bounded and free of ``/`` and ``#``."""
    cleaned = clean_label(raw)
    assert len(cleaned) <= MAX_LABEL
    assert "/" not in cleaned and "#" not in cleaned
    assert all(ch.isprintable() for ch in cleaned)


def test_own_word_beats_the_adders_which_beats_the_placeholder() -> None:
    """A placeholder takes any name; the member's own name replaces the adder's, never back."""
    row = known(CY, placeholder_label(CY.fingerprint), named=PLACEHOLDER)
    by_adder = name_member(row, "carl", by_self=False)
    assert by_adder is not None and (by_adder.label, by_adder.named) == ("carl", BY_ADDER)
    own = name_member(by_adder, "cy", by_self=True)
    assert own is not None and (own.label, own.named) == ("cy", BY_SELF)
    assert name_member(own, "carl", by_self=False) is None
    assert name_member(own, "cy", by_self=True) is None  # nothing new
    renamed = name_member(own, "cyrus", by_self=True)
    assert renamed is not None and renamed.label == "cyrus"
    assert name_member(own, "\x00", by_self=True) is None  # nothing usable


