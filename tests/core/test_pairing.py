"""The pairing machine, two sides at a time, through a fake in-memory slot (STYLE rule 27).

``FakeSlot`` plays the relay's pairing slot: whatever one side writes reaches the other, and
every write, delivery, error and event lands in one ordered log, so a test can assert who did
what in which order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk import crypto
from crosstalk.core.pairing import (
    CONFIRM,
    OFFER,
    SPAKE,
    Confirmed,
    OfferReceived,
    PairingMachine,
    PairingState,
)
from crosstalk.core.words import WORDS
from crosstalk.errors import (
    CrosstalkError,
    DamagedState,
    LocalProtocolError,
    RemoteProtocolError,
    WrongWords,
)
from crosstalk.wire.pairing import (
    Offer,
    PairingSnapshot,
    Purpose,
    Role,
    RoomGrant,
    decode_offer,
    decode_snapshot,
    encode_offer,
    encode_snapshot,
)

ROOM_WORDS = ("acorn", "apple", "bat", "cow")
LINK_WORDS = (*ROOM_WORDS, "crow", "dog")
SLOT = "0815"
INVITER_KEYS = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
JOINER_KEYS = crypto.Keys(b"\x03" * 32, b"\x04" * 32)
RELAY_KEY = b"\x09" * 32


def make_offer(
    keys: crypto.Keys,
    *,
    label: str,
    room: RoomGrant | None = None,
    bundle: bytes | None = None,
    agent: bool = False,
) -> Offer:
    return Offer(
        label=label,
        machine=f"{label}-laptop",
        agent=agent,
        ed_pub=keys.ed_pub,
        x_pub=keys.x_pub,
        relay_url="ws://127.0.0.1:8787/ws",
        relay_key=RELAY_KEY,
        room=room,
        identity_bundle=bundle,
    )


GRANT = RoomGrant(room_id="r-0815", key=b"\x07" * 32)
INVITER_OFFER = make_offer(INVITER_KEYS, label="ann", room=GRANT)
JOINER_OFFER = make_offer(JOINER_KEYS, label="bob", agent=True)


def started(
    role: Role,
    *,
    words: tuple[str, ...] = ROOM_WORDS,
    offer: Offer | None = None,
    purpose: Purpose = Purpose.ROOM,
    slot: str = SLOT,
    seed: int | None = None,
) -> PairingMachine:
    """A machine that has run ``start`` with deterministic entropy and nonce for its role."""
    seed = seed if seed is not None else (1 if role is Role.INVITER else 2)
    if offer is None:
        offer = INVITER_OFFER if role is Role.INVITER else JOINER_OFFER
    machine = PairingMachine(purpose=purpose, role=role, slot=slot)
    machine.start(
        words=words,
        offer=offer,
        offer_nonce=bytes([seed]) * 24,
        entropy=bytes([seed]) * 64,
    )
    return machine


Tamper = Callable[[str, int, bytes], bytes]


@attrs.define
class FakeSlot:
    """Two machines joined by an in-memory slot; ``log`` records everything, in order."""

    sides: dict[str, PairingMachine]
    tamper: Tamper | None = None
    log: list[tuple[str, str, object]] = attrs.Factory(list)
    errors: dict[str, CrosstalkError] = attrs.Factory(dict)
    sent: dict[str, list[tuple[int, bytes]]] = attrs.Factory(dict)

    def pump(self) -> None:
        """Deliver until nothing moves (bounded: a pairing is three messages a side)."""
        for _ in range(10):
            if not self._round():
                return
        raise AssertionError("the fake slot never went quiet")

    def _round(self) -> bool:
        moved = False
        for name, machine in self.sides.items():
            other = next(n for n in self.sides if n != name)
            for index, data in machine.data_to_send():
                moved = True
                self.sent.setdefault(name, []).append((index, data))
                self.log.append((name, "sent", index))
                if self.tamper is not None:
                    data = self.tamper(name, index, data)
                self._deliver(other, index, data)
            for event in machine.events_received():
                self.log.append((name, "event", type(event).__name__))
        return moved

    def _deliver(self, name: str, index: int, data: bytes) -> None:
        try:
            self.sides[name].message_received(index, data)
        except CrosstalkError as exc:
            self.log.append((name, "raised", type(exc).__name__))
            self.errors.setdefault(name, exc)
        for event in self.sides[name].events_received():
            self.log.append((name, "event", event))


def pair(inviter: PairingMachine, joiner: PairingMachine, tamper: Tamper | None = None) -> FakeSlot:
    slot = FakeSlot({"inviter": inviter, "joiner": joiner}, tamper=tamper)
    slot.pump()
    return slot


def offers_received(slot: FakeSlot, name: str) -> list[Offer]:
    return [
        event.offer
        for who, what, event in slot.log
        if who == name and what == "event" and isinstance(event, OfferReceived)
    ]


def indices_sent(slot: FakeSlot, name: str) -> list[int]:
    return [index for index, _ in slot.sent.get(name, [])]


# --- the happy path ---------------------------------------------------------------------------


def test_two_sides_with_the_same_words_exchange_offers() -> None:
    """Both sides confirm, then each receives exactly the other's offer; both end DONE."""
    slot = pair(started(Role.INVITER), started(Role.JOINER))
    assert slot.errors == {}
    assert offers_received(slot, "inviter") == [JOINER_OFFER]
    assert offers_received(slot, "joiner") == [INVITER_OFFER]
    assert slot.sides["inviter"].state is PairingState.DONE
    assert slot.sides["joiner"].state is PairingState.DONE


def test_the_exchange_runs_spake_then_confirmation_then_offers_in_that_order() -> None:
    """The ordered log: SPAKE2 both ways, then each side's MAC, Confirmed, and only then offers.

    The joiner already holds the inviter's SPAKE2 message when it starts sending, so its MAC
    follows its own SPAKE2 message at once; neither offer leaves before its sender confirmed.
    """
    slot = pair(started(Role.INVITER), started(Role.JOINER))
    assert slot.log == [
        ("inviter", "sent", SPAKE),
        ("joiner", "sent", SPAKE),
        ("joiner", "sent", CONFIRM),
        ("inviter", "event", Confirmed()),
        ("inviter", "sent", CONFIRM),
        ("joiner", "event", Confirmed()),
        ("inviter", "sent", OFFER),
        ("joiner", "event", OfferReceived(INVITER_OFFER)),
        ("joiner", "sent", OFFER),
        ("inviter", "event", OfferReceived(JOINER_OFFER)),
    ]


def test_link_pairing_hands_the_identity_bundle_to_the_joiner() -> None:
    """With six words and purpose ``link`` the joiner receives the inviter's identity bundle."""
    bundle = b"identity bundle bytes"
    inviter = started(
        Role.INVITER,
        purpose=Purpose.LINK,
        words=LINK_WORDS,
        offer=make_offer(INVITER_KEYS, label="ann", bundle=bundle),
    )
    joiner = started(
        Role.JOINER,
        purpose=Purpose.LINK,
        words=LINK_WORDS,
        offer=make_offer(JOINER_KEYS, label="ann"),
    )
    slot = pair(inviter, joiner)
    assert [offer.identity_bundle for offer in offers_received(slot, "joiner")] == [bundle]
    assert inviter.state is joiner.state is PairingState.DONE


def test_pinned_vector_of_a_whole_exchange() -> None:
    """With injected entropy and nonces every message is pinned (hash of all six, in order)."""
    slot = pair(started(Role.INVITER), started(Role.JOINER))
    digest = hashlib.sha256()
    for name in ("inviter", "joiner"):
        for index, data in slot.sent[name]:
            digest.update(bytes([index]) + len(data).to_bytes(4, "big") + data)
    assert [len(data) for _, data in slot.sent["inviter"]][:2] == [33, 32]
    assert digest.hexdigest() == PINNED_EXCHANGE


PINNED_EXCHANGE = "e236ee3e93016bf7c04b5abea7241179149546d5e7bffff9420c71f5e2012359"


# --- wrong words and attackers ----------------------------------------------------------------


def test_wrong_words_end_both_sides_in_wrong_words_and_nothing_is_adopted() -> None:
    """One differing word: both sides raise WrongWords, no offer is sent or received.

    The inviter meets the joiner's MAC first and raises. Its own MAC was queued before it
    checked, and its shell still sends it, so the joiner then meets a wrong MAC and raises too:
    each side learns of the mismatch by itself, and neither has sent an offer.
    """
    joiner = started(Role.JOINER, words=("acorn", "apple", "bat", "crow"))
    slot = pair(started(Role.INVITER), joiner)
    assert slot.log == [
        ("inviter", "sent", SPAKE),
        ("joiner", "sent", SPAKE),
        ("joiner", "sent", CONFIRM),
        ("inviter", "raised", "WrongWords"),
        ("inviter", "sent", CONFIRM),
        ("joiner", "raised", "WrongWords"),
    ]
    for name in ("inviter", "joiner"):
        assert slot.sides[name].state is PairingState.WRONG_WORDS
        assert OFFER not in indices_sent(slot, name)
        assert offers_received(slot, name) == []
        assert slot.errors[name].code == "wrong_words"
        assert "nothing was adopted" in slot.errors[name].message


def test_the_same_words_on_another_slot_do_not_confirm() -> None:
    """The slot is bound into SPAKE2: right words on a different slot are wrong words."""
    slot = pair(started(Role.INVITER), started(Role.JOINER, slot="0816"))
    assert isinstance(slot.errors["inviter"], WrongWords)
    assert isinstance(slot.errors["joiner"], WrongWords)


@settings(max_examples=20)  # each example runs two pure-Python SPAKE2 sides
@given(st.lists(st.sampled_from(WORDS), min_size=4, max_size=4), st.integers(3, 255))
def test_a_third_party_with_the_slot_but_not_the_words_cannot_confirm(
    guess: list[str], seed: int
) -> None:
    """Someone who joins the slot with guessed words never gets the inviter's offer."""
    if tuple(guess) == ROOM_WORDS:
        return  # a correct guess is not a wrong guess (one in 2**36)
    inviter = started(Role.INVITER)
    slot = pair(inviter, started(Role.JOINER, words=tuple(guess), seed=seed))
    assert inviter.state is PairingState.WRONG_WORDS
    assert OFFER not in indices_sent(slot, "inviter")
    assert offers_received(slot, "inviter") == []


def test_a_reflected_spake_message_is_refused() -> None:
    """An attacker who echoes the inviter's own SPAKE2 message back gets a protocol error."""
    inviter = started(Role.INVITER)
    [(index, message)] = inviter.data_to_send()
    with pytest.raises(RemoteProtocolError):
        inviter.message_received(index, message)
    assert inviter.state is PairingState.ERROR
    assert inviter.data_to_send() == []


def test_a_reflected_confirmation_does_not_verify() -> None:
    """Echoing the inviter's MAC back (without knowing the words) counts as wrong words."""
    inviter, joiner = started(Role.INVITER), started(Role.JOINER)
    inviter.data_to_send()
    [(_, joiner_message)] = joiner.data_to_send()
    inviter.message_received(SPAKE, joiner_message)
    [(index, inviter_mac)] = inviter.data_to_send()
    with pytest.raises(WrongWords):
        inviter.message_received(index, inviter_mac)


def test_a_tampered_offer_is_rejected_and_not_adopted() -> None:
    """One flipped bit in the inviter's sealed offer: the joiner raises and adopts nothing."""

    def flip_offer(sender: str, index: int, data: bytes) -> bytes:
        if sender == "inviter" and index == OFFER:
            return data[:-1] + bytes([data[-1] ^ 1])
        return data

    slot = pair(started(Role.INVITER), started(Role.JOINER), tamper=flip_offer)
    assert isinstance(slot.errors["joiner"], crypto.OpenFailed)
    assert slot.sides["joiner"].state is PairingState.ERROR
    assert offers_received(slot, "joiner") == []


# --- offers that break the rules of their role ------------------------------------------------


def test_two_inviters_reject_each_others_room_grant() -> None:
    """An offer that carries a room when it should not is a protocol error on receipt."""
    other_inviter = started(
        Role.INVITER, offer=make_offer(JOINER_KEYS, label="eve", room=GRANT), seed=2
    )
    slot = pair(started(Role.INVITER), other_inviter)
    assert "no room" in slot.errors["inviter"].message
    assert offers_received(slot, "inviter") == []


def test_joining_your_own_invite_is_refused() -> None:
    """A joiner offering the inviter's own identity key is refused by the inviter."""
    joiner = started(Role.JOINER, offer=make_offer(INVITER_KEYS, label="ann"))
    slot = pair(started(Role.INVITER), joiner)
    assert "your own identity" in slot.errors["inviter"].message
    assert offers_received(slot, "inviter") == []


@pytest.mark.parametrize(
    ("role", "offer", "problem"),
    [
        (Role.INVITER, make_offer(INVITER_KEYS, label="ann"), "a room"),
        (Role.JOINER, make_offer(JOINER_KEYS, label="bob", room=GRANT), "no room"),
        (Role.JOINER, make_offer(JOINER_KEYS, label="bob", bundle=b"x"), "no identity bundle"),
    ],
)
def test_start_refuses_our_own_offer_if_it_breaks_the_rules(
    role: Role, offer: Offer, problem: str
) -> None:
    """We never send an offer the other side would reject: start() raises first."""
    with pytest.raises(LocalProtocolError, match=problem):
        started(role, offer=offer)


# --- ordering, replays and illegal inputs -----------------------------------------------------


def run_alone(machine: PairingMachine, peer: PairingMachine) -> list[tuple[int, bytes]]:
    """Complete a pairing and return everything ``peer`` sent, in order."""
    slot = pair(machine, peer)
    assert slot.errors == {}
    return slot.sent["joiner"]


def test_messages_arriving_out_of_order_are_held_until_their_turn() -> None:
    """The peer's three messages delivered newest first still complete the pairing."""
    joiner_messages = run_alone(started(Role.INVITER), started(Role.JOINER))
    fresh = started(Role.INVITER)
    fresh.data_to_send()
    for index, data in reversed(joiner_messages):
        fresh.message_received(index, data)
    assert fresh.state is PairingState.DONE
    assert fresh.events_received() == [Confirmed(), OfferReceived(JOINER_OFFER)]


def test_an_offer_is_not_opened_before_the_confirmation_checks() -> None:
    """An early offer waits: with only index 0 and 2 delivered, nothing is received."""
    joiner_messages = dict(run_alone(started(Role.INVITER), started(Role.JOINER)))
    fresh = started(Role.INVITER)
    fresh.message_received(OFFER, joiner_messages[OFFER])
    fresh.message_received(SPAKE, joiner_messages[SPAKE])
    assert fresh.state is PairingState.CONFIRMING
    assert fresh.events_received() == []


def test_a_replayed_message_is_ignored_even_after_the_end() -> None:
    """The relay replays a slot after a reconnect: identical repeats change nothing."""
    joiner_messages = run_alone(started(Role.INVITER), started(Role.JOINER))
    fresh = started(Role.INVITER)
    for index, data in joiner_messages + joiner_messages:
        fresh.message_received(index, data)
    assert fresh.state is PairingState.DONE
    assert len(fresh.events_received()) == 2


def test_a_different_message_at_a_used_index_is_a_protocol_error() -> None:
    """Two different messages for one step park the machine in ERROR."""
    inviter = started(Role.INVITER)
    joiner_message = started(Role.JOINER).data_to_send()[0][1]
    inviter.message_received(SPAKE, joiner_message)
    with pytest.raises(RemoteProtocolError):
        inviter.message_received(SPAKE, started(Role.JOINER, seed=9).data_to_send()[0][1])
    assert inviter.state is PairingState.ERROR


@pytest.mark.parametrize(
    ("index", "data"),
    [(3, b"x"), (-1, b"x"), (SPAKE, b"S" * 34), (CONFIRM, b"m" * 33), (OFFER, b"o" * (2**20 + 1))],
    ids=["index-3", "negative-index", "long-spake", "long-mac", "huge-offer"],
)
def test_malformed_peer_messages_are_protocol_errors(index: int, data: bytes) -> None:
    """Unknown indices and oversized messages raise RemoteProtocolError and end in ERROR."""
    machine = started(Role.INVITER)
    with pytest.raises(RemoteProtocolError):
        machine.message_received(index, data)
    assert machine.state is PairingState.ERROR


def test_a_short_confirmation_is_a_protocol_error_not_wrong_words() -> None:
    """A MAC of the wrong length is malformed, which is different from a MAC that mismatches."""
    inviter = started(Role.INVITER)
    inviter.message_received(SPAKE, started(Role.JOINER).data_to_send()[0][1])
    with pytest.raises(RemoteProtocolError) as caught:
        inviter.message_received(CONFIRM, b"short")
    assert not isinstance(caught.value, WrongWords)
    assert inviter.state is PairingState.ERROR


def test_inputs_before_start_and_after_the_end_are_local_errors() -> None:
    """Feeding an unstarted or finished machine, or starting twice, is our own mistake."""
    idle = PairingMachine(purpose=Purpose.ROOM, role=Role.INVITER, slot=SLOT)
    with pytest.raises(LocalProtocolError):
        idle.message_received(SPAKE, b"S" * 33)
    with pytest.raises(LocalProtocolError):
        idle.serialize()
    machine = started(Role.INVITER)
    with pytest.raises(LocalProtocolError):
        machine.start(
            words=ROOM_WORDS, offer=INVITER_OFFER, offer_nonce=b"n" * 24, entropy=b"e" * 64
        )
    pair(machine, started(Role.JOINER, words=("acorn", "apple", "bat", "crow")))
    assert machine.state is PairingState.WRONG_WORDS
    with pytest.raises(LocalProtocolError):
        machine.message_received(OFFER, b"late")
    assert machine.state is PairingState.WRONG_WORDS


@pytest.mark.parametrize(
    "arguments",
    [
        {"words": ROOM_WORDS[:3]},
        {"words": (*ROOM_WORDS[:3], "xylophone")},
        {"offer_nonce": b"n" * 12},
        {"entropy": b"e" * 32},
    ],
    ids=["too-few-words", "unknown-word", "short-nonce", "short-entropy"],
)
def test_start_refuses_malformed_arguments(arguments: dict[str, object]) -> None:
    """start() checks its words, nonce and entropy and raises LocalProtocolError."""
    full: dict[str, object] = {
        "words": ROOM_WORDS,
        "offer": INVITER_OFFER,
        "offer_nonce": b"n" * 24,
        "entropy": b"e" * 64,
    }
    full.update(arguments)
    machine = PairingMachine(purpose=Purpose.ROOM, role=Role.INVITER, slot=SLOT)
    with pytest.raises(LocalProtocolError):
        machine.start(**full)  # type: ignore[arg-type]  # deliberately malformed keyword sets


def test_a_slot_must_be_four_digits() -> None:
    """The machine refuses a slot that is not four ASCII digits."""
    with pytest.raises(LocalProtocolError):
        PairingMachine(purpose=Purpose.ROOM, role=Role.INVITER, slot="12a4")


@settings(max_examples=50)  # each example runs a pure-Python SPAKE2 start
@given(st.integers(-2, 4), st.binary(max_size=64))
def test_garbage_from_the_peer_raises_only_protocol_errors(index: int, data: bytes) -> None:
    """Any index and bytes from the peer: RemoteProtocolError or nothing, never a crash."""
    machine = started(Role.INVITER)
    try:
        machine.message_received(index, data)
    except RemoteProtocolError:
        assert machine.state is PairingState.ERROR
    else:
        assert machine.state in {PairingState.WAITING, PairingState.CONFIRMING}


# --- restarts ---------------------------------------------------------------------------------


def test_a_restored_machine_resumes_and_sends_identical_bytes() -> None:
    """Restore from serialize() mid-pairing: same messages as an uninterrupted run, then DONE."""
    reference = pair(started(Role.INVITER), started(Role.JOINER))
    inviter = started(Role.INVITER)
    first = inviter.data_to_send()
    blob = inviter.serialize()
    del inviter  # the actor crashed

    restored = PairingMachine.restore(blob)
    assert restored.state is PairingState.WAITING
    slot = FakeSlot({"inviter": restored, "joiner": started(Role.JOINER)})
    slot.pump()
    assert slot.sent["inviter"] == reference.sent["inviter"]
    assert first == reference.sent["inviter"][:1]
    assert offers_received(slot, "inviter") == [JOINER_OFFER]


def test_the_snapshot_stays_the_same_through_the_exchange() -> None:
    """serialize() gives the same bytes after start and after DONE: one save is enough."""
    inviter = started(Role.INVITER)
    at_start = inviter.serialize()
    pair(inviter, started(Role.JOINER))
    assert inviter.state is PairingState.DONE
    assert inviter.serialize() == at_start


def test_restore_refuses_a_damaged_snapshot() -> None:
    """A snapshot that does not parse raises DamagedState, never a bare exception."""
    with pytest.raises(DamagedState):
        PairingMachine.restore(b"{not a snapshot")


def test_snapshot_repr_shows_no_secret() -> None:
    """The snapshot's repr names purpose, role and slot only."""
    snapshot = decode_snapshot(started(Role.INVITER).serialize())
    assert snapshot.spake_state.hex() not in repr(snapshot)
    assert "spake_state" not in repr(snapshot)


# --- wire models ------------------------------------------------------------------------------

keys32 = st.binary(min_size=32, max_size=32)
texts = st.text(min_size=1, max_size=40)
grants = st.builds(RoomGrant, room_id=texts, key=keys32)
offers = st.builds(
    Offer,
    label=texts,
    machine=texts,
    agent=st.booleans(),
    ed_pub=keys32,
    x_pub=keys32,
    relay_url=texts,
    relay_key=keys32,
    room=st.none() | grants,
    identity_bundle=st.none() | st.binary(max_size=200),
)


@given(offers)
def test_offers_round_trip_through_the_converter(offer: Offer) -> None:
    """Any offer encodes to JSON bytes and decodes to an equal offer."""
    assert decode_offer(encode_offer(offer)) == offer


@given(
    offers,
    st.sampled_from(Purpose),
    st.sampled_from(Role),
    st.from_regex(r"[0-9]{4}", fullmatch=True),
    st.binary(max_size=300),
)
def test_snapshots_round_trip_through_the_converter(
    offer: Offer, purpose: Purpose, role: Role, slot: str, blob: bytes
) -> None:
    """Any snapshot encodes and decodes to an equal snapshot."""
    snapshot = PairingSnapshot(
        purpose=purpose,
        role=role,
        slot=slot,
        spake_state=blob,
        my_message=blob[:33],
        offer=offer,
        offer_nonce=b"\x00" * 24,
    )
    assert decode_snapshot(encode_snapshot(snapshot)) == snapshot


@pytest.mark.parametrize(
    "mangle",
    [
        lambda raw: raw.replace(b'"agent":true', b'"agent":"yes"'),
        lambda raw: raw.replace(b'"label":"bob"', b'"label":7'),
        lambda raw: raw.replace(b'"label":"bob"', b'"label":""'),
        lambda raw: raw.replace(b'"relay_key":"', b'"relay_key":"AAAA'),
        lambda raw: raw[:-1],
        lambda raw: b"[]",
    ],
    ids=["bool-as-string", "number-label", "empty-label", "short-key", "cut", "not-object"],
)
def test_malformed_offers_are_remote_protocol_errors(mangle: Callable[[bytes], bytes]) -> None:
    """An offer of the wrong shape or types is refused, never coerced."""
    raw = encode_offer(JOINER_OFFER)
    with pytest.raises(RemoteProtocolError):
        decode_offer(mangle(raw))
