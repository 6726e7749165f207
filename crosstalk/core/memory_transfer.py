"""Moving a room's memory snapshot through the room log: compress, split, sign, reassemble, check.

Theory of operation
-------------------
A member back after the relay's retention (or one who joined after the room's first ops) cannot
rebuild facts and tasks from the log, so another member sends the whole memory as a snapshot.
The snapshot travels as ordinary room ops (``SyncChunk``), which the relay limits to 1 MiB each
and which every member receives, so it is compressed first (zlib; canonical JSON of facts
compresses several times over) and split into pieces of at most :data:`CHUNK_BYTES`.

The sender signs :func:`signed_message`: a domain label, the room id, the request id, the
snapshot's ``last_seq`` and the SHA-256 of its canonical bytes. The receiver, in
:func:`unpack_snapshot`, joins the pieces in index order, decompresses with a hard output bound
(:data:`MAX_SNAPSHOT_BYTES`, so a small bomb cannot fill memory), checks the digest, parses,
and checks that re-encoding gives exactly the same bytes (a snapshot must be canonical, so equal
hashes mean equal memory). The signature itself is checked by the shell against the sender's key
in the room roster; this module only builds the bytes to sign. Everything wrong raises
:class:`~crosstalk.errors.RemoteProtocolError`: nothing from a bad snapshot is adopted.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib

from cattrs.errors import BaseValidationError

from crosstalk.core.memory import canonical_bytes
from crosstalk.errors import LocalProtocolError, RemoteProtocolError
from crosstalk.wire.converter import converter
from crosstalk.wire.memory import MemorySnapshot

CHUNK_BYTES = 384 * 1024  # base64 and JSON framing grow it by a third; the relay allows 1 MiB
MAX_CHUNKS = 256
MAX_SNAPSHOT_BYTES = 256 * 1024 * 1024
_DOMAIN = b"crosstalk memory snapshot v1\x00"


def signed_message(room_id: str, request_id: str, last_seq: int, digest: bytes) -> bytes:
    """The bytes a snapshot's sender signs (length-prefixed fields: none runs into another)."""
    parts = [room_id.encode(), request_id.encode(), str(last_seq).encode(), digest]
    return _DOMAIN + b"".join(struct.pack(">I", len(p)) + p for p in parts)


def pack_snapshot(
    snapshot: MemorySnapshot, *, chunk_bytes: int = CHUNK_BYTES
) -> tuple[bytes, list[bytes]]:
    """``(digest, pieces)``: the SHA-256 of the canonical bytes, and the compressed pieces.

    Raises:
        LocalProtocolError: the snapshot would need more than :data:`MAX_CHUNKS` pieces.
    """
    raw = canonical_bytes(snapshot)
    packed = zlib.compress(raw, 6)
    pieces = [packed[i : i + chunk_bytes] for i in range(0, len(packed), chunk_bytes)] or [b""]
    if len(pieces) > MAX_CHUNKS:
        raise LocalProtocolError(f"a memory snapshot of {len(raw)} bytes is too large to send")
    return hashlib.sha256(raw).digest(), pieces


def unpack_snapshot(room_id: str, pieces: list[bytes], digest: bytes) -> MemorySnapshot:
    """Reassemble and check a snapshot for ``room_id`` from its pieces, in index order.

    Raises:
        RemoteProtocolError: it does not decompress within the bound, its digest does not match,
            it does not parse, it is not canonical, or it is for another room.
    """
    decompressor = zlib.decompressobj()
    try:
        raw = decompressor.decompress(b"".join(pieces), MAX_SNAPSHOT_BYTES)
    except zlib.error:
        raise RemoteProtocolError("a memory snapshot does not decompress") from None
    if decompressor.unconsumed_tail or not decompressor.eof:
        raise RemoteProtocolError("a memory snapshot is truncated or larger than allowed")
    if hashlib.sha256(raw).digest() != digest:
        raise RemoteProtocolError("a memory snapshot does not match its digest")
    try:
        snapshot = converter.structure(json.loads(raw), MemorySnapshot)
    except (BaseValidationError, ValueError, TypeError, KeyError):
        raise RemoteProtocolError("a memory snapshot does not parse") from None
    if canonical_bytes(snapshot) != raw:
        raise RemoteProtocolError("a memory snapshot is not in canonical form")
    if snapshot.room_id != room_id:
        raise RemoteProtocolError("a memory snapshot is for another room")
    return snapshot
