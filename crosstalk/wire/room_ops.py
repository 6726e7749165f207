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

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, structure_remote
from crosstalk.wire.kinds import Intent, Kind
from crosstalk.wire.memory import MemoryOp, parse_memory_op

BODY_MAGIC = b"ct"
BODY_VERSION = 1
_HEADER = struct.Struct(">2sBI")
_JSON = json.JSONDecoder()
_NUMBER = (int, float)  # a tuple: isinstance builds nothing per call, as with int | float
MAX_TEXT = 64 * 1024
MAX_LABEL = 200


MAX_SLICE = 128 * 1024


@attrs.frozen
class Slice:
    """Something attached to a message: a diff, a file, the last turns, a note.

    The receiver shows ``label`` and ``size``; the content is pulled only if an agent asks.
    """

    kind: str  # "diff" | "file" | "turns" | "note"
    label: str
    content: str
    sha256: str
    truncated: bool = False


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
    slices: tuple[Slice, ...] = ()
    refused: bool = False  # an automatic answer: the receiver's attention settings refused
    unprompted_because: str | None = None  # a self-initiated message says why it matters
    closes_thread: bool = False  # ``text`` is the summary closing ``thread``


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
    ``held_from`` is the first seq after the requester's hole that it holds (None: not known, as
    from an older peer); an asked member whose own hole nobody can fill compares it with its own
    to decide which of the two gives up its hole and answers (``crosstalk.core.memory_sync``).
    ``repair``: the requester has no hole but gave one up; only a member whose memory gave
    nothing up answers (its snapshot repairs every such member: see
    ``crosstalk.store.memory_log``, "Repair").
    """

    request_id: str
    have: int
    ask: str | None = None
    held_from: int | None = None
    repair: bool = False


@attrs.frozen
class SyncChunk:
    """One piece of a signed, zlib-compressed memory snapshot answering ``request_id``.

    ``sig`` is the sender's Ed25519 signature over the snapshot's digest (see
    :mod:`crosstalk.core.memory_transfer`); every chunk repeats it with ``digest`` and ``count``.
    ``conceded``: the sender's memory gave up ops nobody could send it, so this snapshot lacks
    them (a member installing it gives them up too, until a complete member repairs it).
    """

    request_id: str
    last_seq: int
    index: int
    count: int
    digest: bytes
    sig: bytes
    data: bytes
    conceded: bool = False


@attrs.frozen
class InvitedMember:
    fingerprint: str
    label: str
    ed_pub: bytes
    x_pub: bytes


@attrs.frozen
class RoomInvite:
    """Sent in a room of two: "I added you to this named room". Holds the key sealed to you."""

    room_id: str
    name: str
    epoch: int
    sealed_key: bytes  # crypto.seal_to(invitee's X25519 key, room key, context=room id + epoch)
    members: tuple[InvitedMember, ...]


@attrs.frozen
class Rekey:
    """A member was removed: the room's next epoch key, sealed to each remaining member."""

    epoch: int
    removed: str  # fingerprint
    sealed: dict[str, bytes]  # fingerprint -> crypto.seal_to(member, key, context)


@attrs.frozen
class MemberNamed:
    """What members of this room are called, ``fingerprint -> label``.

    The relay's roster carries keys but never names; this op is how members who never paired
    with someone learn what to call them. Posted by an inviter for the invitee, by a joiner for
    themselves, and by a joiner's inviter for everyone it knows (a welcome: the joiner missed
    the ops that named those before it).
    """

    names: dict[str, str]


@attrs.frozen
class KeyShare:
    """The room's key for ``epoch``, sealed to the members named: for a joiner whose invitation
    carried an older key (a rekey happened before they accepted, and they could not read it).
    Sealed under the joiner's own older epoch, so that they can open it."""

    epoch: int
    sealed: dict[str, bytes]  # fingerprint -> crypto.seal_to(member, key, context)


@attrs.frozen
class Receipt:
    """The recipient's daemon has the messages (``delivered``) or an agent read them."""

    state: str  # "delivered" | "read"
    msg_ids: tuple[str, ...]


@attrs.frozen
class AskEnded:
    """The asker stopped waiting (timeout or cancel) for the ask with this correlation.

    The receiver withdraws its notice about that ask; the ask itself stays readable. Only the
    asker's own ``AskEnded`` counts: the receiver matches it against the ask's verified sender.
    """

    correlation: str


#: At most this many of a sender's sessions are published, and kept by a receiver.
MAX_SESSIONS = 32
#: A published session's name and project are cut to this many characters.
MAX_NAME = 120


@attrs.frozen
class PublishedSession:
    """One of the sender's agent sessions as roommates see it (the project is a bare name)."""

    name: str
    project: str
    status: str  # busy | idle | unknown
    last_seen: float


@attrs.frozen
class SessionsPublished:
    """The sender's live agent sessions, all of them (it replaces what they published before).

    Posted into each room the sender is in, so only people who share a room with them ever see
    it, and sealed like every op: the relay never learns a session's name or project.
    """

    sessions: tuple[PublishedSession, ...]
    # The newest statement of the room's membership history the sender holds (index and link):
    # a roommate holding that index with another link was shown another history (a fork).
    membership: int = -1
    membership_link: bytes = b""


#: At most this many paths in one ``EditsPublished`` (a sender's newest), and kept by a receiver.
MAX_EDITED_PATHS = 64
#: A repository-relative path longer than this is not published (nor kept).
MAX_EDITED_PATH = 1024
#: What a session says it is doing, cut to this many characters.
MAX_EDIT_NOTE = 200


@attrs.frozen
class EditedPath:
    """One file a session's agent wrote: relative to the repository root, POSIX, and when."""

    path: str
    edited_at: float


@attrs.frozen
class EditsPublished:
    """The files one of the sender's sessions wrote lately in one repository (never contents).

    Presence-like: it replaces what the sender published for that session and repository in
    this room. Posted only into rooms that share the repository (``crosstalk.features.edits``);
    ``repo`` is the repository's bare directory name, never its path.
    """

    repo: str
    session: str
    paths: tuple[EditedPath, ...]
    note: str = ""


RoomOp = (
    MessageOp | MemoryEnvelope | SyncRequest | SyncChunk | RoomInvite | Rekey | Receipt
    | MemberNamed | AskEnded | SessionsPublished | KeyShare | EditsPublished
)
_TAGS: dict[type, str] = {
    EditsPublished: "edits_published",
    AskEnded: "ask_ended",
    SessionsPublished: "sessions_published",
    MemberNamed: "member_named",
    KeyShare: "key_share",
    SyncRequest: "sync_request",
    SyncChunk: "sync_chunk",
    RoomInvite: "room_invite",
    Rekey: "rekey",
    Receipt: "receipt",
}
_BY_TAG: dict[str, type] = {tag: cls for cls, tag in _TAGS.items()}


def encode_op(op: RoomOp) -> bytes:
    """Canonical JSON bytes of a plaintext op (what gets sealed)."""
    if isinstance(op, MessageOp):
        data = {**converter.unstructure(op), "t": "message"}
    elif not isinstance(op, MemoryEnvelope):
        data = {**converter.unstructure(op), "t": _TAGS[type(op)]}
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
        # Ops are UTF-8 (encode_op): decoding it ourselves skips json.loads's guessing among
        # UTF-8, -16 and -32 and its decoder lookup, ~0.7 of a memory op's ~5.5 µs decode.
        data = _JSON.decode(plaintext.decode())
    except (ValueError, UnicodeDecodeError):
        raise RemoteProtocolError("a room op is not JSON") from None
    kind = data.pop("t", None) if isinstance(data, dict) else None
    if kind == "memory":
        return _memory_envelope(data)
    if isinstance(kind, str) and kind in _BY_TAG:
        decoded: RoomOp = structure_remote(data, _BY_TAG[kind])
        return decoded
    if kind != "message":
        raise RemoteProtocolError("a room op has an unknown kind")
    op = structure_remote(data, MessageOp)
    if len(op.text) > MAX_TEXT:
        raise RemoteProtocolError("a message is longer than allowed")
    if any(len(s.content) > MAX_SLICE for s in op.slices):
        raise RemoteProtocolError("a slice is larger than allowed")
    return op


def _memory_envelope(data: dict[str, object]) -> MemoryEnvelope:
    at, label = data.get("at", 0.0), data.get("label", "")
    if isinstance(at, bool) or not isinstance(at, _NUMBER) or not math.isfinite(at):
        raise RemoteProtocolError("a memory op carries a time that is not a number")
    if not isinstance(label, str) or len(label) > MAX_LABEL:
        raise RemoteProtocolError("a memory op carries a bad author label")
    return MemoryEnvelope(parse_memory_op(data.get("op")), at=float(at), label=label)


def frame_body(epoch: int, sealed: bytes) -> bytes:
    """The bytes posted to the relay."""
    return _HEADER.pack(BODY_MAGIC, BODY_VERSION, epoch) + sealed


def body_epoch(body: bytes) -> int | None:
    """The epoch a room op's relay bytes say they are sealed under (``None``: not our framing)."""
    if len(body) < _HEADER.size:
        return None
    magic, version, epoch = _HEADER.unpack_from(body)
    return epoch if magic == BODY_MAGIC and version == BODY_VERSION else None


def unframe_body(body: bytes) -> tuple[int, bytes]:
    """``(epoch, sealed)`` from relay bytes, or RemoteProtocolError."""
    if len(body) < _HEADER.size:
        raise RemoteProtocolError("a room op is too short")
    magic, version, epoch = _HEADER.unpack_from(body)
    if magic != BODY_MAGIC or version != BODY_VERSION:
        raise RemoteProtocolError("a room op has an unknown framing")
    return epoch, body[_HEADER.size :]
