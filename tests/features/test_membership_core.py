"""The membership rules: which relay roster entries a signature chain vouches for, and how a
local roster follows the relay's."""

from __future__ import annotations

import attrs
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
    verify_entries,
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


def trusted(*people: crypto.Keys) -> dict[str, tuple[bytes, bytes]]:
    return {p.fingerprint: (p.ed_pub, p.x_pub) for p in people}


def test_a_chain_from_a_trusted_key_vouches_for_everyone_it_reaches() -> None:
    """ana (trusted) added ben, ben added cy: both follow, whatever order the relay lists them."""
    roster = [entry(CY, BEN), entry(BEN, ANA), entry(ANA, ANA)]
    assert set(verify_entries(ROOM, roster, trusted(ANA))) == {
        ANA.fingerprint, BEN.fingerprint, CY.fingerprint
    }


def test_an_entry_no_chain_reaches_is_left_out() -> None:
    """dan, self-signed (a creator nobody we trust knows), and eve, added by dan, stay out."""
    roster = [entry(ANA, ANA), entry(DAN, DAN), entry(EVE, DAN)]
    assert set(verify_entries(ROOM, roster, trusted(ANA))) == {ANA.fingerprint}


def test_a_relay_that_swaps_a_known_members_box_key_gets_nothing() -> None:
    """Keys for a fingerprint we know must be exactly ours: a swapped X25519 key is refused."""
    swapped = attrs.evolve(entry(BEN, ANA), x_pub=EVE.x_pub)
    assert set(verify_entries(ROOM, [entry(ANA, ANA), swapped], trusted(ANA, BEN))) == {
        ANA.fingerprint
    }


def test_a_forged_or_replayed_signature_does_not_vouch() -> None:
    """A signature over another room, or by someone else than the named adder, is refused."""
    other_room = entry(BEN, ANA, room="room-2")
    wrong_signer = attrs.evolve(entry(CY, DAN), added_by=ANA.fingerprint)
    accepted = verify_entries(ROOM, [entry(ANA, ANA), other_room, wrong_signer], trusted(ANA))
    assert set(accepted) == {ANA.fingerprint}


def test_keys_that_do_not_hash_to_the_fingerprint_are_refused() -> None:
    """The relay cannot present eve's keys under ben's fingerprint, even signed by ana."""
    lying = attrs.evolve(entry(EVE, ANA), fingerprint=BEN.fingerprint)
    assert BEN.fingerprint not in verify_entries(ROOM, [entry(ANA, ANA), lying], trusted(ANA))


def test_reconcile_adds_joiners_marks_leavers_gone_and_keeps_their_keys() -> None:
    """cy joins (named by placeholder until someone names them); ben left: gone, keys kept."""
    local = [known(ANA, "ana"), known(BEN, "ben")]
    change = reconcile(ROOM, local, [entry(ANA, ANA), entry(CY, ANA)], trusted(ANA))
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
    before = reconcile(ROOM, local, [entry(ANA, ANA), entry(CY, ANA, "invited")], trusted(ANA))
    assert before.joined == () and not before.changed
    after = reconcile(ROOM, local, [entry(ANA, ANA), entry(CY, ANA)], trusted(ANA))
    row = next(r for r in after.rows if r.fingerprint == CY.fingerprint)
    assert (row.state, row.label, after.joined) == ("member", "cy", (CY.fingerprint,))


def test_reconcile_trusts_rows_it_verified_before_as_anchors() -> None:
    """ben, known from an earlier roster, vouches for dan even though ana (the root) left."""
    local = [known(ANA, "ana"), known(BEN, "ben", added_by=ANA.fingerprint)]
    change = reconcile(ROOM, local, [entry(BEN, ANA), entry(DAN, BEN)], trusted())
    live = {r.fingerprint for r in change.rows if not r.gone}
    assert live == {BEN.fingerprint, DAN.fingerprint}


def test_a_member_who_comes_back_is_live_again() -> None:
    """A gone row that the relay lists again (re-invited) is no longer gone."""
    local = [known(ANA, "ana"), known(BEN, "ben", gone=True)]
    change = reconcile(ROOM, local, [entry(ANA, ANA), entry(BEN, ANA)], trusted(ANA))
    assert not next(r for r in change.rows if r.fingerprint == BEN.fingerprint).gone
    assert change.joined == (BEN.fingerprint,)


def test_someone_who_came_and_went_while_we_were_away_is_kept_gone_with_their_keys() -> None:
    """cy joined and left while ana was away (sim seed 311): the relay lists cy as left; cy is
    added gone, with the keys ana needs to verify cy's ops, and is neither joined nor gone news.
    dan, left but vouched for by nobody we trust, stays out."""
    local = [known(ANA, "ana"), known(BEN, "ben")]
    roster = [entry(ANA, ANA), entry(BEN, ANA), entry(CY, BEN, "left"), entry(EVE, DAN, "left")]
    change = reconcile(ROOM, local, roster, trusted(ANA))
    rows = {r.fingerprint: r for r in change.rows}
    cy = rows[CY.fingerprint]
    assert (cy.gone, cy.state, cy.ed_pub, cy.added_by) == (
        True, "member", CY.ed_pub, BEN.fingerprint
    )
    assert (change.joined, change.gone, change.unverified) == ((), (), (EVE.fingerprint,))
    assert EVE.fingerprint not in rows


def test_a_member_the_relay_lists_as_left_is_gone() -> None:
    """A live member listed as left is gone (as if the relay had left them out), keys kept."""
    local = [known(ANA, "ana"), known(BEN, "ben")]
    change = reconcile(ROOM, local, [entry(ANA, ANA), entry(BEN, ANA, "left")], trusted(ANA))
    ben = next(r for r in change.rows if r.fingerprint == BEN.fingerprint)
    assert ben.gone and ben.label == "ben" and change.gone == (BEN.fingerprint,)
    again = reconcile(ROOM, change.rows, [entry(ANA, ANA), entry(BEN, ANA, "left")], trusted(ANA))
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


def test_a_member_added_by_someone_who_then_left_still_counts() -> None:
    """Away while cy added eve and then left: cy (known before) still vouches for eve."""
    local = [known(ANA, "ana"), known(BEN, "ben"), known(CY, "cy")]
    relay = [entry(ANA, ANA), entry(BEN, ANA), entry(EVE, CY), entry(DAN, EVE)]
    change = reconcile(ROOM, local, relay, trusted(ANA))
    live = {r.fingerprint for r in change.rows if not r.gone}
    assert live == {ANA.fingerprint, BEN.fingerprint, EVE.fingerprint, DAN.fingerprint}
    assert change.gone == (CY.fingerprint,)


def test_a_key_outside_roster_and_local_rows_vouches_for_nobody() -> None:
    """Without having ever known dan, an entry dan signed stays out."""
    relay = [entry(ANA, ANA), entry(EVE, DAN)]
    change = reconcile(ROOM, [known(ANA, "ana")], relay, trusted(ANA))
    assert change.unverified == (EVE.fingerprint,)
