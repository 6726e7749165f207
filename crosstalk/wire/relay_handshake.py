"""Relay handshake frames: how a connection proves whose it is before anything else.

Nothing else is accepted before ``ready``::

    relay  -> challenge {nonce (32 bytes), relay_key (Ed25519 public), version}
    client -> hello     {ed_pub, x_pub, device, version, sig}
              sig = Ed25519(identity key, hello_transcript(nonce, relay_key, ed_pub, x_pub,
                                                         device, version))
    relay  -> ready     {fingerprint, sig}
              sig = Ed25519(relay key, ready_transcript(nonce, relay_key, ed_pub, x_pub))

The client pins ``relay_key`` and checks ``ready.sig``; the relay derives the identity only from the
verified ``ed_pub`` (its fingerprint), never from a claimed name. ``device`` is a random id per
machine so two linked machines of one identity are distinct devices with their own cursors.
The transcripts are in :mod:`crosstalk.wire.relay_transcripts`. Import these names through
:mod:`crosstalk.wire.relay`, which also holds the codec.
"""

from __future__ import annotations

import attrs

PROTOCOL_VERSION = 2  # 2: membership changes carry signed statements (wire.chain)
NONCE_SIZE = 32


@attrs.frozen
class Challenge:
    nonce: bytes
    relay_key: bytes
    version: int


@attrs.frozen
class Hello:
    ed_pub: bytes
    x_pub: bytes
    device: str
    version: int
    sig: bytes


@attrs.frozen
class Ready:
    fingerprint: str
    sig: bytes
