"""What travels inside a sealed room op, and how the sealed bytes are framed for the relay.

The relay sees only ``body`` bytes: ``b"ct" + version byte + epoch (4 bytes, big-endian) +
sealed``, where ``sealed`` is :func:`crosstalk.crypto.seal_op` over the JSON of one
:data:`RoomOp`. The epoch is outside the seal so the receiver can pick the key; it is also bound
inside as associated data, so changing it breaks the seal.

Plaintext ops are tagged by ``"t"``. Every field a sender controls is untrusted: it is escaped
before it reaches an agent and never decides anything on the receiver's side (the room whose
level applies is the relay room the op arrived in, never a field here).
"""

from __future__ import annotations

import json
import math
import struct

import attrs

from crosstalk.core.triage import Intent, Kind
from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, structure_remote
from crosstalk.wire.memory import MemoryOp, parse_memory_op

BODY_MAGIC = b"ct"
BODY_VERSION = 1
_HEADER = struct.Struct(">2sBI")
MAX_TEXT = 64 * 1024
MAX_LABEL = 200


@attrs.frozen
class MessageOp:
    """A message from one person's agent (or CLI) to a room, or to one session in it."""

    msg_id: str
    text: str
    intent: Intent = Intent.FYI
    kind: Kind = Kind.MESSAGE
    from_label: str = ""
    from_session: str | None = None
    to: str | None = None  # a session or project name on the receiver's side; None = anyone
    thread: str | None = None
    reply_to: str | None = None
    correlation: str | None = None
    sent_at: float = 0.0


@attrs.frozen
class MemoryEnvelope:
    """A room-memory op (fact, task, decision) travelling in the room log.

    ``at`` (the author's clock, Unix seconds) and ``label`` (the author's own name) are what every
    replica records for the op, the author's included: the author never hears its own op back
    from the relay, so the relay's timestamp cannot be the one every replica agrees on.
    """

    op: MemoryOp
    at: float = 0.0
    label: str = ""


@attrs.frozen
class SyncRequest:
    """Ask one member (``ask``) for a snapshot of the room's memory; ``ask`` None is a probe.

    ``have`` is the requester's memory cursor. A probe is answered by nobody: posting it only
    reveals, once it is sequenced, whether the requester missed ops the relay no longer holds.
    """

    request_id: str
    have: int
    ask: str | None = None


@attrs.frozen
class SyncChunk:
    """One piece of a signed, zlib-compressed memory snapshot answering ``request_id``.

    ``sig`` is the sender's Ed25519 signature over the snapshot's digest (see
    :mod:`crosstalk.core.memory_transfer`); every chunk repeats it with ``digest`` and ``count``.
    """

    request_id: str
    last_seq: int
    index: int
    count: int
    digest: bytes
    sig: bytes
    data: bytes


RoomOp = MessageOp | MemoryEnvelope | SyncRequest | SyncChunk
_SYNC_TAGS: dict[type, str] = {SyncRequest: "sync_request", SyncChunk: "sync_chunk"}


def encode_op(op: RoomOp) -> bytes:
    """Canonical JSON bytes of a plaintext op (what gets sealed)."""
    if isinstance(op, MessageOp):
        data = {**converter.unstructure(op), "t": "message"}
    elif isinstance(op, SyncRequest | SyncChunk):
        data = {**converter.unstructure(op), "t": _SYNC_TAGS[type(op)]}
    else:
        data = {"t": "memory", "op": converter.unstructure(op.op, MemoryOp)}
        if op.at:
            data["at"] = op.at
        if op.label:
            data["label"] = op.label
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def decode_op(plaintext: bytes) -> RoomOp:
    """Parse an opened op, or raise RemoteProtocolError."""
    try:
        data = json.loads(plaintext)
    except (ValueError, UnicodeDecodeError):
        raise RemoteProtocolError("a room op is not JSON") from None
    kind = data.pop("t", None) if isinstance(data, dict) else None
    if kind == "memory":
        return _memory_envelope(data)
    if kind == "sync_request":
        return structure_remote(data, SyncRequest)
    if kind == "sync_chunk":
        return structure_remote(data, SyncChunk)
    if kind != "message":
        raise RemoteProtocolError("a room op has an unknown kind")
    op = structure_remote(data, MessageOp)
    if len(op.text) > MAX_TEXT:
        raise RemoteProtocolError("a message is longer than allowed")
    return op


def _memory_envelope(data: dict[str, object]) -> MemoryEnvelope:
    at, label = data.get("at", 0.0), data.get("label", "")
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise RemoteProtocolError("a memory op carries a time that is not a number")
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise RemoteProtocolError("a memory op carries a bad author label")
    return MemoryEnvelope(parse_memory_op(data.get("op")), at=float(at), label=label)


def frame_body(epoch: int, sealed: bytes) -> bytes:
    """The bytes posted to the relay."""
    return _HEADER.pack(BODY_MAGIC, BODY_VERSION, epoch) + sealed


def unframe_body(body: bytes) -> tuple[int, bytes]:
    """``(epoch, sealed)`` from relay bytes, or RemoteProtocolError."""
    if len(body) < _HEADER.size:
        raise RemoteProtocolError("a room op is too short")
    magic, version, epoch = _HEADER.unpack_from(body)
    if magic != BODY_MAGIC or version != BODY_VERSION:
        raise RemoteProtocolError("a room op has an unknown framing")
    return epoch, body[_HEADER.size :]
