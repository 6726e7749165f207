"""Pure pairing cryptography: symmetric SPAKE2 over the words, the transcript both sides sign
off, per-side keys derived from the session key, and the key-confirmation MAC.

As in :mod:`crosstalk.crypto`, no function draws randomness: SPAKE2's entropy is passed in, so
test vectors can be pinned. :mod:`crosstalk.core.pairing` is the machine that uses these.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

import attrs

from crosstalk.crypto import MAC_SIZE, derive_key, frame
from crosstalk.errors import LocalProtocolError, RemoteProtocolError

SPAKE_ENTROPY_SIZE = 64
SPAKE_MESSAGE_SIZE = 33

_PAIR_DOMAIN = b"crosstalk/pair/v1"


def pairing_password(purpose: str, slot: str, words: Sequence[str]) -> bytes:
    """The SPAKE2 password: the words, bound to the slot and the purpose (``room``/``link``)."""
    return frame(_PAIR_DOMAIN, purpose.encode(), slot.encode(), "-".join(words).encode())


def pairing_identity(purpose: str, slot: str) -> bytes:
    """The SPAKE2 symmetric identity: binds the slot and purpose into the session key too."""
    return frame(_PAIR_DOMAIN, purpose.encode(), slot.encode())


def spake_start(password: bytes, identity: bytes, entropy: bytes) -> tuple[bytes, bytes]:
    """Start one symmetric SPAKE2 side from ``entropy`` (64 random bytes).

    Returns ``(state, message)``: ``state`` is the serialised SPAKE2 side (secret: it holds the
    password and our scalar), ``message`` the 33 bytes to send to the other side.
    """
    if len(entropy) != SPAKE_ENTROPY_SIZE:
        raise LocalProtocolError(f"SPAKE2 entropy is {SPAKE_ENTROPY_SIZE} bytes")
    # Imported here, not at the top: spake2 builds its groups' parameters when imported (about
    # 30 ms of a daemon's start on this two-core box, with the cryptography package it pulls
    # in), and only pairing needs it.
    import spake2

    handed_out: list[bytes] = []

    def entropy_once(size: int) -> bytes:
        # spake2's Ed25519 group asks for exactly 64 bytes, once; anything else is a library
        # change we want to hear about rather than silently reuse entropy.
        if handed_out or size != SPAKE_ENTROPY_SIZE:
            raise LocalProtocolError("spake2 asked for unexpected entropy")
        handed_out.append(entropy)
        return entropy

    side = spake2.SPAKE2_Symmetric(password, idSymmetric=identity, entropy_f=entropy_once)
    message: bytes = side.start()
    state: bytes = side.serialize()
    return state, message


def spake_finish(state: bytes, peer_message: bytes) -> bytes:
    """Finish a serialised SPAKE2 side with the peer's message; returns the 32-byte key.

    A wrong password gives a different key, not an error (SPAKE2 has no key confirmation).
    A malformed or reflected message raises :class:`~crosstalk.errors.RemoteProtocolError`.
    """
    # Check the shape ourselves: the library checks lengths with ``assert``, which ``python -O``
    # removes. It does check curve and subgroup membership with real exceptions.
    if len(peer_message) != SPAKE_MESSAGE_SIZE or peer_message[:1] != b"S":
        raise RemoteProtocolError("the other side's pairing message is malformed")
    import spake2  # only pairing needs it (see spake_start)
    from spake2.ed25519_basic import NotOnCurve

    try:
        side = spake2.SPAKE2_Symmetric.from_serialized(state)
    except (spake2.SPAKEError, ValueError, KeyError, TypeError, AttributeError):
        # ValueError covers bad JSON and bad hex; the others a JSON document of the wrong shape.
        raise LocalProtocolError("the saved SPAKE2 state is damaged") from None
    try:
        key: bytes = side.finish(peer_message)
    except (spake2.SPAKEError, NotOnCurve, ValueError):
        # Reflection (our own message back) is a SPAKEError; a point off the curve or outside
        # the prime-order subgroup is NotOnCurve or ValueError. All mean the message is unusable.
        raise RemoteProtocolError("the other side's pairing message is malformed") from None
    return key


def pairing_transcript(purpose: str, slot: str, message_1: bytes, message_2: bytes) -> bytes:
    """The pairing transcript both sides agree on: purpose, slot and both SPAKE2 messages.

    The messages are sorted because symmetric SPAKE2 has no first and second side.
    """
    first, second = sorted((message_1, message_2))
    return frame(_PAIR_DOMAIN, purpose.encode(), slot.encode(), first, second)


@attrs.frozen(repr=False)
class PairingKeys:
    """Keys derived from a SPAKE2 session key. Each side confirms and seals with its own keys.

    A side's keys are bound to that side's SPAKE2 message, so a message reflected back to its
    sender never verifies or opens.
    """

    my_confirm: bytes
    their_confirm: bytes
    my_offer: bytes
    their_offer: bytes

    def __repr__(self) -> str:
        return "PairingKeys(<secret>)"


def derive_pairing_keys(
    session_key: bytes, transcript: bytes, my_message: bytes, their_message: bytes
) -> PairingKeys:
    """Derive per-side confirmation and offer keys from the SPAKE2 session key."""

    def side_key(label: bytes, message: bytes) -> bytes:
        return derive_key(session_key, label, frame(transcript, message))

    return PairingKeys(
        my_confirm=side_key(b"ct-pair-confirm", my_message),
        their_confirm=side_key(b"ct-pair-confirm", their_message),
        my_offer=side_key(b"ct-pair-offer", my_message),
        their_offer=side_key(b"ct-pair-offer", their_message),
    )


def confirmation_mac(confirm_key: bytes, transcript: bytes) -> bytes:
    """The key-confirmation MAC one side sends: keyed BLAKE2b of the transcript."""
    return derive_key(confirm_key, b"ct-pair-mac", transcript, size=MAC_SIZE)


def confirmation_matches(confirm_key: bytes, transcript: bytes, mac: bytes) -> bool:
    """Whether ``mac`` is the other side's confirmation (constant-time comparison)."""
    return hmac.compare_digest(confirmation_mac(confirm_key, transcript), mac)
