"""crosstalk.crypto: identity, signatures, sealing, room ops and the pairing helpers.

Vectors are pinned by injecting seeds and nonces (STYLE rule 32). The Ed25519 and X25519
vectors are the published ones from RFC 8032 §7.1 (test 1) and RFC 7748 §6.1; the others pin
our own constructions so that an accidental change of format shows up here.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk import crypto, crypto_pairing
from crosstalk.crypto import BadSignature, Keys, OpenFailed
from crosstalk.errors import LocalProtocolError, RemoteProtocolError

RFC8032_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC8032_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC8032_EMPTY_SIGNATURE = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)
RFC7748_ALICE_SECRET = bytes.fromhex(
    "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
)
RFC7748_ALICE_PUBLIC = bytes.fromhex(
    "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
)

ALICE = Keys(bytes(range(32)), bytes(range(32, 64)))
BOB = Keys(bytes(range(64, 96)), bytes(range(96, 128)))
MALLORY = Keys(b"\x66" * 32, b"\x67" * 32)
EPOCH_KEY = b"\x05" * 32

SEAL_VECTOR = bytes.fromhex(
    "13be4feaeaf204c7fd3358fc9c00721881d174278128227ec674f37f7fe97b6d"
    "090909090909090909090909090909090909090909090909"
    "b2bc3102062fa5474c1c660ac572bc1b7f05521381a7bde2"
)
OP_VECTOR = bytes.fromhex(
    "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0c55cd1740f8fa5fb79fb3da7ee4a84a639482edf5"
    "dd742e47df6a14092f5738a47d289445b71e1cf6d44fcfe68dee0ebadbadac1efd89558c8f4ee50abb677a29ef"
    "b2ce24bc635d62ad394203ada359babe829f82f5772311f13c853e"
)


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1 :]


# --- identity and signatures ------------------------------------------------------------------


def test_keys_from_seeds_match_the_rfc_vectors() -> None:
    """Ed25519 and X25519 public keys derived from seeds equal RFC 8032 / RFC 7748 values."""
    keys = Keys(RFC8032_SEED, RFC7748_ALICE_SECRET)
    assert keys.ed_pub == RFC8032_PUBLIC
    assert keys.x_pub == RFC7748_ALICE_PUBLIC
    assert keys.fingerprint == crypto.fingerprint(RFC8032_PUBLIC)


def test_fingerprint_is_four_groups_of_sha256_hex() -> None:
    """The fingerprint is the first 64 bits of SHA-256 of the Ed25519 key, grouped by four."""
    assert ALICE.fingerprint == "5647-5aa7-5463-474c"
    assert BOB.fingerprint == "0339-6219-237f-75a6"


def test_keys_repr_and_str_never_show_secrets() -> None:
    """Neither repr nor str of Keys contains the secret seeds, in hex or as bytes."""
    for text in (repr(ALICE), str(ALICE), f"{ALICE}"):
        assert ALICE.ed_seed.hex() not in text
        assert ALICE.x_secret.hex() not in text
        assert repr(ALICE.ed_seed) not in text
        assert ALICE.fingerprint in text


def test_keys_refuse_seeds_of_the_wrong_size() -> None:
    """A seed that is not 32 bytes is refused at construction."""
    with pytest.raises(ValueError, match="32 bytes"):
        Keys(b"short", b"\x00" * 32)


def test_signature_matches_the_rfc_vector_and_verifies() -> None:
    """sign() of the empty message with the RFC 8032 seed gives the published signature."""
    keys = Keys(RFC8032_SEED, RFC7748_ALICE_SECRET)
    signature = crypto.sign(keys, b"")
    assert signature == RFC8032_EMPTY_SIGNATURE
    crypto.verify(keys.ed_pub, b"", signature)


@pytest.mark.parametrize(
    ("ed_pub", "message", "signature"),
    [
        (BOB.ed_pub, b"hello", crypto.sign(ALICE, b"hello")),
        (ALICE.ed_pub, b"hellO", crypto.sign(ALICE, b"hello")),
        (ALICE.ed_pub, b"hello", crypto.sign(ALICE, b"hello")[:-1]),
        (b"\x01" * 31, b"hello", crypto.sign(ALICE, b"hello")),
    ],
    ids=["wrong-key", "wrong-message", "short-signature", "malformed-key"],
)
def test_verify_raises_bad_signature_on_any_mismatch(
    ed_pub: bytes, message: bytes, signature: bytes
) -> None:
    """verify() raises BadSignature (a RemoteProtocolError) for every kind of mismatch."""
    with pytest.raises(BadSignature) as caught:
        crypto.verify(ed_pub, message, signature)
    assert isinstance(caught.value, RemoteProtocolError)


# --- key derivation and AEAD ------------------------------------------------------------------


def test_derive_key_is_pinned_and_separated_by_label_and_context() -> None:
    """derive_key gives a pinned value, and any change of label or context changes it."""
    key = crypto.derive_key(b"\x01" * 32, b"ct-test", b"ctx")
    assert key.hex() == "92ceff903192c49726a82e762c530989aa7f573889d4fbe2d9a5b3ac513362c6"
    assert crypto.derive_key(b"\x01" * 32, b"ct-test2", b"ctx") != key
    assert crypto.derive_key(b"\x01" * 32, b"ct-test", b"ctx2") != key


def test_derive_key_refuses_a_label_longer_than_blake2b_personalisation() -> None:
    """A label over 16 bytes is a programming error, not silently truncated."""
    with pytest.raises(LocalProtocolError):
        crypto.derive_key(b"\x01" * 32, b"x" * 17)


def test_aead_refuses_a_nonce_of_the_wrong_size() -> None:
    """Sealing with a nonce that is not 24 bytes raises LocalProtocolError."""
    with pytest.raises(LocalProtocolError):
        crypto.aead_seal(EPOCH_KEY, b"x", nonce=b"\x00" * 12, ad=b"")


# --- sealing to an X25519 key -----------------------------------------------------------------


def _seal(context: bytes = b"room-1|0") -> bytes:
    return crypto.seal_to(
        BOB.x_pub, b"room key", ephemeral_secret=b"\x07" * 32, nonce=b"\x09" * 24, context=context
    )


def test_seal_to_matches_the_pinned_vector_and_opens() -> None:
    """With a fixed ephemeral secret and nonce the sealed bytes are pinned; Bob opens them."""
    sealed = _seal()
    assert sealed == SEAL_VECTOR
    assert crypto.open_sealed(BOB, sealed, context=b"room-1|0") == b"room key"


@pytest.mark.parametrize(
    ("keys", "sealed", "context"),
    [
        (ALICE, SEAL_VECTOR, b"room-1|0"),
        (BOB, SEAL_VECTOR, b"room-1|1"),
        (BOB, _flip(SEAL_VECTOR, 70), b"room-1|0"),
        (BOB, _flip(SEAL_VECTOR, 3), b"room-1|0"),
        (BOB, SEAL_VECTOR[:40], b"room-1|0"),
        (BOB, b"", b"room-1|0"),
    ],
    ids=["wrong-recipient", "wrong-context", "tampered-box", "tampered-ephemeral", "cut", "empty"],
)
def test_open_sealed_rejects_anything_but_the_right_recipient_and_context(
    keys: Keys, sealed: bytes, context: bytes
) -> None:
    """Opening fails with OpenFailed for the wrong key, context, or altered bytes."""
    with pytest.raises(OpenFailed):
        crypto.open_sealed(keys, sealed, context=context)


def test_seal_to_refuses_a_degenerate_public_key() -> None:
    """Sealing to the all-zero X25519 point (no shared secret) is refused."""
    with pytest.raises(LocalProtocolError):
        crypto.seal_to(b"\x00" * 32, b"x", ephemeral_secret=b"\x07" * 32, nonce=b"\x09" * 24)


# --- room ops ---------------------------------------------------------------------------------


def _seal_op(keys: Keys = ALICE, plaintext: bytes = b'{"text":"hi"}') -> bytes:
    return crypto.seal_op(
        keys,
        EPOCH_KEY,
        plaintext,
        room_id="r1",
        epoch=3,
        op_id="op-1",
        nonce=b"\x0b" * 24,
    )


def _open_op(
    sealed: bytes = OP_VECTOR,
    *,
    epoch_key: bytes = EPOCH_KEY,
    sender: bytes = ALICE.ed_pub,
    room_id: str = "r1",
    epoch: int = 3,
    op_id: str = "op-1",
) -> bytes:
    return crypto.open_op(
        epoch_key, sealed, sender_ed_pub=sender, room_id=room_id, epoch=epoch, op_id=op_id
    )


def test_seal_op_matches_the_pinned_vector_and_opens_for_the_signer() -> None:
    """A room op with an injected nonce is pinned, and opens against Alice's roster key."""
    sealed = _seal_op()
    assert sealed == OP_VECTOR
    opened = _open_op(sealed)
    assert opened == b'{"text":"hi"}'


@pytest.mark.parametrize(
    "open_it",
    [
        lambda: _open_op(room_id="r2"),
        lambda: _open_op(epoch=4),
        lambda: _open_op(op_id="op-2"),
        lambda: _open_op(sender=BOB.ed_pub),
        lambda: _open_op(epoch_key=b"\x06" * 32),
        lambda: _open_op(_flip(OP_VECTOR, 30)),
        lambda: _open_op(_flip(OP_VECTOR, 5)),
        lambda: _open_op(OP_VECTOR[:-1]),
    ],
    ids=["room", "epoch", "op-id", "sender", "key", "ciphertext", "nonce", "cut"],
)
def test_open_op_rejects_any_mismatch(open_it: Callable[[], bytes]) -> None:
    """Changing room, epoch, op id, sender, key or any byte makes opening raise OpenFailed."""
    with pytest.raises(OpenFailed):
        open_it()


def test_a_member_cannot_forge_an_op_in_another_members_name() -> None:
    """Mallory holds the epoch key and binds Alice's fingerprint, but cannot sign as Alice."""
    ad = crypto.op_associated_data(room_id="r1", epoch=3, sender=ALICE.fingerprint, op_id="op-1")
    evil = b'{"text":"evil"}'
    forged_signature = crypto.sign(MALLORY, crypto.op_signed_bytes(ad, evil))
    forged = crypto.aead_seal(EPOCH_KEY, forged_signature + evil, nonce=b"\x0c" * 24, ad=ad)
    with pytest.raises(BadSignature):
        _open_op(forged)


def test_op_signature_binds_its_place_so_it_cannot_be_moved() -> None:
    """A signed op lifted into another op id and re-encrypted by a member fails the signature."""
    inner_key_ad = crypto.op_associated_data(
        room_id="r1", epoch=3, sender=ALICE.fingerprint, op_id="op-1"
    )
    signed = crypto.aead_open(EPOCH_KEY, OP_VECTOR, ad=inner_key_ad)
    moved_ad = crypto.op_associated_data(
        room_id="r1", epoch=3, sender=ALICE.fingerprint, op_id="op-9"
    )
    moved = crypto.aead_seal(EPOCH_KEY, signed, nonce=b"\x0d" * 24, ad=moved_ad)
    with pytest.raises(BadSignature):
        _open_op(moved, op_id="op-9")


@given(position=st.integers(min_value=0, max_value=len(OP_VECTOR) - 1), bit=st.integers(0, 7))
def test_any_single_bit_flip_in_a_sealed_op_is_rejected(position: int, bit: int) -> None:
    """Flipping any one bit anywhere in a sealed op makes it fail to open."""
    tampered = bytearray(OP_VECTOR)
    tampered[position] ^= 1 << bit
    with pytest.raises(OpenFailed):
        _open_op(bytes(tampered))


def test_op_refuses_a_negative_epoch() -> None:
    """An epoch outside 0..2**63-1 is a programming error."""
    with pytest.raises(LocalProtocolError):
        crypto.op_associated_data(room_id="r", epoch=-1, sender="f", op_id="o")


# --- pairing helpers --------------------------------------------------------------------------


def _spake(words: list[str], entropy: bytes, slot: str = "1234") -> tuple[bytes, bytes]:
    password = crypto_pairing.pairing_password("room", slot, words)
    identity = crypto_pairing.pairing_identity("room", slot)
    return crypto_pairing.spake_start(password, identity, entropy)


WORDS = ["acorn", "apple", "bat", "cow"]


def test_spake_with_the_same_words_agrees_on_a_key() -> None:
    """Two sides with the same words, slot and purpose derive the same 32-byte key."""
    state_a, message_a = _spake(WORDS, b"\x01" * 64)
    state_b, message_b = _spake(WORDS, b"\x02" * 64)
    key_a = crypto_pairing.spake_finish(state_a, message_b)
    assert key_a == crypto_pairing.spake_finish(state_b, message_a)
    assert len(key_a) == 32


@pytest.mark.parametrize(
    ("words_b", "slot_b"),
    [(["acorn", "apple", "bat", "crow"], "1234"), (WORDS, "1235")],
    ids=["one-word-differs", "slot-differs"],
)
def test_spake_with_different_words_or_slot_gives_different_keys(
    words_b: list[str], slot_b: str
) -> None:
    """A different word, or the same words on another slot, silently gives different keys."""
    state_a, message_a = _spake(WORDS, b"\x01" * 64)
    state_b, message_b = _spake(words_b, b"\x02" * 64, slot=slot_b)
    key_a = crypto_pairing.spake_finish(state_a, message_b)
    assert key_a != crypto_pairing.spake_finish(state_b, message_a)


def test_spake_start_is_deterministic_given_entropy() -> None:
    """The same entropy gives the same message (so pairing vectors can be pinned)."""
    assert _spake(WORDS, b"\x01" * 64)[1] == _spake(WORDS, b"\x01" * 64)[1]
    assert _spake(WORDS, b"\x01" * 64)[1] != _spake(WORDS, b"\x03" * 64)[1]


def test_spake_start_refuses_entropy_of_the_wrong_size() -> None:
    """SPAKE2 entropy must be exactly 64 bytes."""
    with pytest.raises(LocalProtocolError):
        _spake(WORDS, b"\x01" * 32)


def test_spake_finish_rejects_our_own_message_reflected() -> None:
    """Our own message sent back to us is refused, not turned into a key."""
    state, message = _spake(WORDS, b"\x01" * 64)
    with pytest.raises(RemoteProtocolError):
        crypto_pairing.spake_finish(state, message)


@given(st.binary(max_size=40))
def test_spake_finish_raises_only_remote_protocol_error_on_garbage(garbage: bytes) -> None:
    """Any malformed peer message gives RemoteProtocolError or, if it happens to be a valid
    point, a key; never another exception."""
    state, _ = _spake(WORDS, b"\x01" * 64)
    try:
        key = crypto_pairing.spake_finish(state, garbage)
    except RemoteProtocolError:
        return
    assert len(key) == 32


def test_spake_finish_reports_a_damaged_saved_state() -> None:
    """A saved SPAKE2 state that does not parse raises LocalProtocolError."""
    with pytest.raises(LocalProtocolError, match="damaged"):
        crypto_pairing.spake_finish(b"{not json", b"S" + b"\x00" * 32)


def test_pairing_keys_differ_per_side_and_mirror_between_sides() -> None:
    """Each side's confirm/offer keys differ, and one side's 'mine' is the other's 'theirs'."""
    transcript = crypto_pairing.pairing_transcript("room", "1234", b"S-a", b"S-b")
    assert transcript == crypto_pairing.pairing_transcript("room", "1234", b"S-b", b"S-a")
    keys_a = crypto_pairing.derive_pairing_keys(b"\x11" * 32, transcript, b"S-a", b"S-b")
    keys_b = crypto_pairing.derive_pairing_keys(b"\x11" * 32, transcript, b"S-b", b"S-a")
    assert keys_a.my_confirm == keys_b.their_confirm
    assert keys_a.my_offer == keys_b.their_offer
    assert len({keys_a.my_confirm, keys_a.their_confirm, keys_a.my_offer, keys_a.their_offer}) == 4
    assert "11" * 8 not in repr(keys_a)


def test_confirmation_mac_checks_only_under_the_senders_key() -> None:
    """A MAC made under one key matches that key only, and not after any change."""
    transcript = b"transcript"
    mac = crypto_pairing.confirmation_mac(b"\x21" * 32, transcript)
    assert crypto_pairing.confirmation_matches(b"\x21" * 32, transcript, mac)
    assert not crypto_pairing.confirmation_matches(b"\x22" * 32, transcript, mac)
    assert not crypto_pairing.confirmation_matches(b"\x21" * 32, b"transcripT", mac)
    assert not crypto_pairing.confirmation_matches(b"\x21" * 32, transcript, mac[:-1])
