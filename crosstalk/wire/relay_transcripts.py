"""The byte strings a daemon and the relay sign (see :mod:`crosstalk.wire.relay`).

Each transcript starts with its own purpose string ending in NUL, then every field
length-prefixed (four bytes, big-endian), so a signature made for one purpose, or over one
field list, can never be replayed as another.
"""

from __future__ import annotations


def _lp(part: bytes) -> bytes:
    """Length-prefix one field so no two field lists share an encoding."""
    return len(part).to_bytes(4, "big") + part


def hello_transcript(
    nonce: bytes, relay_key: bytes, ed_pub: bytes, x_pub: bytes, device: str, version: int
) -> bytes:
    """What the client signs in ``hello``: the challenge, both relay and client keys, device."""
    fields = (nonce, relay_key, ed_pub, x_pub, device.encode(), version.to_bytes(4, "big"))
    return b"crosstalk/relay/hello/v1\x00" + b"".join(_lp(f) for f in fields)


def ready_transcript(nonce: bytes, relay_key: bytes, ed_pub: bytes, x_pub: bytes) -> bytes:
    """What the relay signs in ``ready``: the same challenge bound to the client's keys."""
    fields = (nonce, relay_key, ed_pub, x_pub)
    return b"crosstalk/relay/ready/v1\x00" + b"".join(_lp(f) for f in fields)


def member_transcript(room: str, ed_pub: bytes, x_pub: bytes) -> bytes:
    """What an adder signs for a roster entry (the creator signs its own)."""
    fields = (room.encode(), ed_pub, x_pub)
    return b"crosstalk/relay/member/v1\x00" + b"".join(_lp(f) for f in fields)
