"""Frames and keys the relay-link machine tests share (a fake relay's side of the handshake)."""

from __future__ import annotations

from nacl.signing import SigningKey

from crosstalk import crypto
from crosstalk.core.link import OutboxItem
from crosstalk.wire import relay as w

URL = "ws://relay.test"
NONCE = bytes(range(32))
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)
RELAY = SigningKey(b"\x03" * 32)
RELAY_PUB = bytes(RELAY.verify_key)
OTHER_RELAY_PUB = bytes(SigningKey(b"\x04" * 32).verify_key)


def challenge(key: bytes = RELAY_PUB, version: int = w.PROTOCOL_VERSION) -> w.Challenge:
    return w.Challenge(NONCE, key, version)


def ready(keys: crypto.Keys = ME, signer: SigningKey = RELAY) -> w.Ready:
    transcript = w.ready_transcript(NONCE, RELAY_PUB, keys.ed_pub, keys.x_pub)
    return w.Ready(keys.fingerprint, signer.sign(transcript).signature)


def op(seq: int, room: str = "r1") -> w.Op:
    return w.Op(room, seq, "aaaa-bbbb-cccc-dddd", f"o{seq}", b"x", 1.0)


def item(n: int, room: str = "r1") -> OutboxItem:
    return OutboxItem(n, room, f"op-{n}", f"body-{n}".encode())
