"""Pure cryptographic functions over PyNaCl and spake2.

No function here draws its own randomness: seeds, ephemeral secrets, nonces and SPAKE2 entropy
are passed in, so test vectors can be pinned (STYLE rule 2). The callers (actors) draw them from
``nacl.utils.random``.

What lives here:

* identity: :class:`Keys` (an Ed25519 signing key and an X25519 key, both from 32-byte seeds)
  and :func:`fingerprint`;
* :func:`sign` / :func:`verify` (``verify`` raises :class:`BadSignature`, never returns a flag);
* :func:`seal_to` / :func:`open_sealed`: anonymous sealing to an X25519 public key (room keys
  carried in invitations and rekeys);
* :func:`seal_op` / :func:`open_op`: room ops, signed then encrypted under the epoch key;
* :func:`work_done` / :func:`do_work`: the proof of work a relay asks of a stranger before a
  pairing slot (see ``relay/work.py`` for when and why);
* the pairing helpers (SPAKE2 over the words, the transcript, per-side key derivation and the
  confirmation MAC) are :mod:`crosstalk.crypto_pairing`'s.

Key derivation is keyed BLAKE2b with a personalisation string (:func:`derive_key`), not HKDF.
Every key we derive from is already uniformly random (a SPAKE2 key is a SHA-256 output; a raw
X25519 output is first hashed with both public keys, see ``_seal_key``), so HKDF's extract step buys
nothing; keyed BLAKE2b is a PRF in one call, its 16-byte personalisation gives each use its own
domain, and it is the same function libsodium builds ``crypto_kdf`` and ``crypto_kx`` on, available
here from ``hashlib`` without hand-rolled HMAC plumbing.

Every byte string that is hashed, signed or bound as associated data is built with
:func:`frame` (length-prefixed parts), so no two different field lists encode the same bytes.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Callable

import attrs
import nacl.bindings
import nacl.exceptions
import nacl.signing

from crosstalk.errors import LocalProtocolError, RemoteProtocolError

KEY_SIZE = 32
NONCE_SIZE = 24
SIGNATURE_SIZE = 64
MAC_SIZE = 32
_AEAD_TAG_SIZE = 16


class OpenFailed(RemoteProtocolError):
    """A sealed message did not open: it was altered, or sealed for someone else. It was dropped."""


class BadSignature(OpenFailed):
    """A signature did not match the key of the sender it claims to come from. It was dropped."""


@functools.lru_cache(maxsize=4096)  # opening any op computes its sender's; senders are few
def fingerprint(ed25519_public: bytes) -> str:
    """First 64 bits of SHA-256 of an Ed25519 public key, shown ``xxxx-xxxx-xxxx-xxxx``."""
    digest = hashlib.sha256(ed25519_public).hexdigest()[:16]
    return "-".join(digest[i : i + 4] for i in range(0, 16, 4))


def _exactly(size: int) -> Callable[[object, attrs.Attribute[bytes], bytes], None]:
    def check(_instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
        if not isinstance(value, bytes) or len(value) != size:
            raise ValueError(f"{attribute.name} must be {size} bytes")

    return check


@attrs.frozen(repr=False)
class Keys:
    """One identity: an Ed25519 signing key and an X25519 key, each from 32 secret bytes.

    ``repr`` shows the fingerprint and public keys only, so a Keys value in a log line or a
    traceback never leaks a secret.
    """

    ed_seed: bytes = attrs.field(validator=_exactly(KEY_SIZE))
    x_secret: bytes = attrs.field(validator=_exactly(KEY_SIZE))
    ed_pub: bytes = attrs.field(init=False)
    x_pub: bytes = attrs.field(init=False)

    @ed_pub.default
    def _ed_pub_from_seed(self) -> bytes:
        return bytes(nacl.signing.SigningKey(self.ed_seed).verify_key)

    @x_pub.default
    def _x_pub_from_secret(self) -> bytes:
        return nacl.bindings.crypto_scalarmult_base(self.x_secret)

    @property
    def fingerprint(self) -> str:
        """This identity's fingerprint, ``xxxx-xxxx-xxxx-xxxx``."""
        return fingerprint(self.ed_pub)

    def __repr__(self) -> str:
        return (
            f"Keys(fingerprint={self.fingerprint!r}, ed_pub={self.ed_pub.hex()!r}, "
            f"x_pub={self.x_pub.hex()!r})"
        )

    __str__ = __repr__


def frame(*parts: bytes) -> bytes:
    """Concatenate parts, each prefixed by its 4-byte big-endian length (unambiguous)."""
    return b"".join(struct.pack(">I", len(part)) + part for part in parts)


def derive_key(key: bytes, label: bytes, context: bytes = b"", *, size: int = KEY_SIZE) -> bytes:
    """Derive ``size`` bytes from a uniformly random ``key`` for one use named by ``label``.

    Keyed BLAKE2b with ``label`` (at most 16 bytes) as its personalisation; see the module note.
    """
    if len(label) > 16:
        raise LocalProtocolError("a key-derivation label is at most 16 bytes")
    return hashlib.blake2b(context, key=key, person=label, digest_size=size).digest()


# --- signatures -------------------------------------------------------------------------------


def sign(keys: Keys, message: bytes) -> bytes:
    """Detached Ed25519 signature (64 bytes) of ``message`` by ``keys``."""
    # libsodium's secret key is seed || public key, what SigningKey(seed) derives again (half
    # of a signature's cost); Keys holds both already. The bytes signed are the same.
    signed = nacl.bindings.crypto_sign(message, keys.ed_seed + keys.ed_pub)
    return signed[:SIGNATURE_SIZE]


def verify(ed_pub: bytes, message: bytes, signature: bytes) -> None:
    """Check a detached signature; raise :class:`BadSignature` if it does not match ``ed_pub``."""
    try:
        nacl.signing.VerifyKey(ed_pub).verify(message, signature)
    except (nacl.exceptions.CryptoError, ValueError, TypeError):
        raise BadSignature("a signature did not match its claimed sender; it was dropped") from None


# --- authenticated encryption -----------------------------------------------------------------


def aead_seal(key: bytes, plaintext: bytes, *, nonce: bytes, ad: bytes) -> bytes:
    """XChaCha20-Poly1305 under ``key``; returns ``nonce || ciphertext``."""
    if len(nonce) != NONCE_SIZE:
        raise LocalProtocolError(f"a nonce is {NONCE_SIZE} bytes")
    if len(key) != KEY_SIZE:
        raise LocalProtocolError(f"a key is {KEY_SIZE} bytes")
    box = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, ad, nonce, key)
    return nonce + box


def aead_open(key: bytes, sealed: bytes, *, ad: bytes) -> bytes:
    """Inverse of :func:`aead_seal`; raise :class:`OpenFailed` on any mismatch."""
    if len(sealed) < NONCE_SIZE + _AEAD_TAG_SIZE or len(key) != KEY_SIZE:
        raise OpenFailed("a sealed message was too short or its key malformed; it was dropped")
    nonce, box = sealed[:NONCE_SIZE], sealed[NONCE_SIZE:]
    try:
        return nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(box, ad, nonce, key)
    except nacl.exceptions.CryptoError:
        raise OpenFailed("a sealed message did not open; it was dropped") from None


# --- sealing to a public key ------------------------------------------------------------------

_SEAL_DOMAIN = b"crosstalk/seal/v1"


def _seal_key(shared: bytes, eph_pub: bytes, recipient_pub: bytes) -> bytes:
    # The raw X25519 output is not uniform: hash it together with both public keys (as
    # libsodium's crypto_kx does), which also binds the key to this pair of keys.
    digest = hashlib.blake2b(frame(shared, eph_pub, recipient_pub), person=b"ct-seal-v1")
    return digest.digest()[:KEY_SIZE]


def seal_to(
    recipient_x_pub: bytes,
    plaintext: bytes,
    *,
    ephemeral_secret: bytes,
    nonce: bytes,
    context: bytes = b"",
) -> bytes:
    """Seal ``plaintext`` so that only the holder of ``recipient_x_pub``'s secret can open it.

    ``context`` (for example a room id and epoch) is bound as associated data and must be given
    again to open. Returns ``ephemeral_public || nonce || ciphertext``.
    """
    if len(ephemeral_secret) != KEY_SIZE or len(recipient_x_pub) != KEY_SIZE:
        raise LocalProtocolError("X25519 keys are 32 bytes")
    eph_pub = nacl.bindings.crypto_scalarmult_base(ephemeral_secret)
    try:
        shared = nacl.bindings.crypto_scalarmult(ephemeral_secret, recipient_x_pub)
    except RuntimeError:
        raise LocalProtocolError("cannot seal to a degenerate X25519 public key") from None
    key = _seal_key(shared, eph_pub, recipient_x_pub)
    ad = frame(_SEAL_DOMAIN, eph_pub, recipient_x_pub, context)
    return eph_pub + aead_seal(key, plaintext, nonce=nonce, ad=ad)


def open_sealed(keys: Keys, sealed: bytes, *, context: bytes = b"") -> bytes:
    """Open what :func:`seal_to` sealed to ``keys.x_pub``; raise :class:`OpenFailed` otherwise."""
    if len(sealed) < KEY_SIZE:
        raise OpenFailed("a sealed message was too short; it was dropped")
    eph_pub, rest = sealed[:KEY_SIZE], sealed[KEY_SIZE:]
    try:
        shared = nacl.bindings.crypto_scalarmult(keys.x_secret, eph_pub)
    except RuntimeError:
        raise OpenFailed("a sealed message used a degenerate key; it was dropped") from None
    key = _seal_key(shared, eph_pub, keys.x_pub)
    return aead_open(key, rest, ad=frame(_SEAL_DOMAIN, eph_pub, keys.x_pub, context))


# --- room ops ---------------------------------------------------------------------------------

_OP_DOMAIN = b"crosstalk/op/v1"
_OP_SIGNATURE_DOMAIN = b"crosstalk/op-signature/v1"


def op_associated_data(*, room_id: str, epoch: int, sender: str, op_id: str) -> bytes:
    """The associated data binding a room op to its room, epoch, sender fingerprint and op id."""
    if not 0 <= epoch < 2**63:
        raise LocalProtocolError("an epoch is a non-negative 63-bit integer")
    return frame(
        _OP_DOMAIN,
        room_id.encode(),
        struct.pack(">Q", epoch),
        sender.encode(),
        op_id.encode(),
    )


def op_signed_bytes(ad: bytes, plaintext: bytes) -> bytes:
    """What the sender of a room op signs: the op's associated data and its plaintext."""
    return frame(_OP_SIGNATURE_DOMAIN, ad, plaintext)


def seal_op(
    keys: Keys,
    epoch_key: bytes,
    plaintext: bytes,
    *,
    room_id: str,
    epoch: int,
    op_id: str,
    nonce: bytes,
) -> bytes:
    """Sign ``plaintext`` as ``keys``, then encrypt it under the room's epoch key.

    The signature covers the associated data as well as the plaintext. Signing the plaintext
    alone would let any member (who holds the epoch key) lift someone else's signed op into
    another room, epoch or op id and re-encrypt it there.

    Returns ``nonce || ciphertext`` where the ciphertext holds ``signature || plaintext``.
    """
    ad = op_associated_data(room_id=room_id, epoch=epoch, sender=keys.fingerprint, op_id=op_id)
    signature = sign(keys, op_signed_bytes(ad, plaintext))
    return aead_seal(epoch_key, signature + plaintext, nonce=nonce, ad=ad)


def open_op(
    epoch_key: bytes,
    sealed: bytes,
    *,
    sender_ed_pub: bytes,
    room_id: str,
    epoch: int,
    op_id: str,
) -> bytes:
    """Open a room op and check it was signed by ``sender_ed_pub`` (the roster key).

    Raises :class:`OpenFailed` if the AEAD does not open (tampered, wrong key, wrong room, epoch,
    sender or op id) and :class:`BadSignature` if it opens but the sender did not sign it.
    """
    sender = fingerprint(sender_ed_pub)
    ad = op_associated_data(room_id=room_id, epoch=epoch, sender=sender, op_id=op_id)
    inner = aead_open(epoch_key, sealed, ad=ad)
    if len(inner) < SIGNATURE_SIZE:
        raise OpenFailed("a room op carried no signature; it was dropped")
    signature, plaintext = inner[:SIGNATURE_SIZE], inner[SIGNATURE_SIZE:]
    verify(sender_ed_pub, op_signed_bytes(ad, plaintext), signature)
    return plaintext


WORK_TAG = b"crosstalk slot work v1"
MAX_WORK_PROOF = 16  # bytes: do_work's proofs are 8
# The most work a crosstalk client does for a relay (2**24 hashes, about 15 s): a relay asking
# more is misbehaving, and a relay may not be configured to ask more.
MAX_WORK_BITS = 24


def _work_digest(seed: bytes, proof: bytes) -> int:
    return int.from_bytes(hashlib.sha256(frame(WORK_TAG, seed, proof)).digest(), "big")


def work_done(seed: bytes, proof: bytes, bits: int) -> bool:
    """Whether ``proof`` solves the relay's puzzle ``seed`` at ``bits``: SHA-256 of the framed
    tag, seed and proof starts with ``bits`` zero bits."""
    if bits <= 0:
        return True
    if len(proof) > MAX_WORK_PROOF:
        return False
    return _work_digest(seed, proof) >> (256 - bits) == 0


def do_work(seed: bytes, bits: int) -> bytes:
    """The first 8-byte counter that solves ``seed`` at ``bits``: 2**bits hashes expected,
    about 0.13 s at 17 bits in CPython on one core of the project machine (40 runs: median
    0.06 s, 39th 0.64 s). Deterministic, so a test can pin it."""
    if bits <= 0:
        return b""
    # The framed prefix is hashed once; each try hashes only the proof's length and bytes.
    # frame(a, b, c) is frame(a, b) + frame(c): the prefix is hashed once, and each try adds
    # only the proof's length and bytes.
    prefix = hashlib.sha256(frame(WORK_TAG, seed))
    length = struct.pack(">I", 8)
    limit = 1 << (256 - bits)
    counter = 0
    while True:
        proof = counter.to_bytes(8, "big")
        attempt = prefix.copy()
        attempt.update(length + proof)
        if int.from_bytes(attempt.digest(), "big") < limit:
            return proof
        counter += 1
