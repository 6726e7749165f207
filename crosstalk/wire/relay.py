"""Frames between a daemon and the relay, and the transcripts both sides sign.

Transport: one WebSocket at ``/ws``; every message is a JSON text frame holding one object whose
``"t"`` field names the frame. Bytes travel as standard base64. Unknown fields are ignored; a
missing or mistyped field, an unknown ``t`` or anything that is not a JSON object is answered with
``error {code: "bad_frame"}``.

Handshake (nothing else is accepted before ``ready``)::

    relay  -> challenge {nonce (32 bytes), relay_key (Ed25519 public), version}
    client -> hello     {ed_pub, x_pub, device, version, sig}
              sig = Ed25519(identity key, hello_transcript(nonce, relay_key, ed_pub, x_pub,
                                                         device, version))
    relay  -> ready     {fingerprint, sig}
              sig = Ed25519(relay key, ready_transcript(nonce, relay_key, ed_pub, x_pub))

The client pins ``relay_key`` and checks ``ready.sig``; the relay derives the identity only from the
verified ``ed_pub`` (its fingerprint), never from a claimed name. ``device`` is a random id per
machine so two linked machines of one identity are distinct devices with their own cursors.

Requests carry an integer ``req`` chosen by the client; each gets exactly one reply carrying the
same ``req``: ``ok``, a typed result (``roster``, ``rooms``, ``posted``, ``resumed``, ``slot``,
``slot_joined``) or ``error {req, code, message}``. ``ack`` has no reply unless it fails.
Pushes (``req`` absent or null): ``op``, ``roster``, ``invited``, ``room_gone``, ``presence``,
``slot_joined``, ``slot_msg``, ``slot_closed``. Only ops are stored for absent devices; other
pushes go to whoever is connected, so a client that (re)connects sends ``resume``, then asks
``rooms`` (which lists invitations too) and ``roster`` for each room to catch up.

Rooms: ``create {room, sig}`` (the creator's own roster entry, self-signed), ``add {room, ed_pub,
x_pub, sig}`` (sig by the adder over ``member_transcript``), ``accept``, ``decline``, ``leave``,
``remove {room, fingerprint}``, ``roster {room}``, ``rooms {}``. Room log: ``post {room, op_id,
body}`` -> ``posted {room, seq}`` once committed; ``op`` pushes to every other device of every
joined member; ``ack {room, seq}``; ``resume {cursors}`` replays everything after each cursor and
answers ``resumed`` (with each room's ``first`` held seq, so a gap is visible); live ops flow to a
connection only after it has sent ``resume``. Cursors are per device and also cover the device's
own posts: ack the highest seq you hold, counting ``posted`` replies, or the room's backlog will
count your own ops against you. Dedupe on ``(room, op_id)`` lasts while the op is held.
Only a joined member may add, and only someone it shares a joined room with, or someone it has
just met through a pairing slot (that counts for one add, 15 minutes). Any joined member may
remove another; the room is deleted with its log when no joined member is left.

Pairing: ``slot_open`` -> ``slot {slot: "NNNN", expires_in: 900}``; ``slot_join`` (one attempt per
slot; missed joins are rate-limited per source address) -> ``slot_joined`` with the owner's keys,
and the owner is pushed ``slot_joined`` with the joiner's; ``slot_send {slot, index 0-15, data
<= 8 KiB}`` (write-once per side and index, pushed as ``slot_msg``); ``slot_attach`` after a
reconnect replays the other side's parts; ``slot_close`` burns the slot.

Limits: op body 1 MiB, frame 1.5 MiB, per-identity op rate, per-room backlog of unacknowledged ops
(``backlog_full``). 20 malformed or unauthenticated frames close that connection.

Error codes (stable): see :data:`ERROR_CODES`.
"""

from __future__ import annotations

import functools
import json
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import attrs
from cattrs.errors import BaseValidationError
from cattrs.strategies import configure_tagged_union

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter

PROTOCOL_VERSION = 1
NONCE_SIZE = 32
MAX_OP_BODY = 1 << 20
MAX_SLOT_DATA = 8 << 10
MAX_SLOT_INDEX = 15
MAX_FRAME = 3 << 19  # 1.5 MiB of JSON text: a full 1 MiB body in base64 plus its envelope

ERROR_CODES = (
    "bad_frame",  # not JSON, not an object, unknown t, missing or mistyped field
    "unauthenticated",  # anything but a valid hello before ready, or a bad signature
    "version",  # protocol version not spoken by this relay
    "unknown_room",  # no such room (or you cannot know of it)
    "room_exists",  # create with an id already in use
    "not_a_member",  # the action needs joined membership
    "not_invited",  # accept/decline without an invitation
    "already_member",  # add of someone already in the roster
    "forbidden",  # add of someone you share no room (or pairing) with; bad member signature
    "too_large",  # op body, slot data or frame over its limit
    "rate_limited",  # per-identity op rate, or slot guesses per source
    "backlog_full",  # a member's unacknowledged backlog in this room is at its cap
    "slot_not_found",
    "slot_expired",
    "slot_taken",  # the slot's single join attempt is used
    "slot_part_written",  # slot_send to a (side, index) already written
    "busy",  # no free slot number
)

Side = Literal["owner", "joiner"]
MemberState = Literal["invited", "joined"]


# --- transcripts -------------------------------------------------------------------------------


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


# --- shared shapes -----------------------------------------------------------------------------


@attrs.frozen
class Member:
    """One roster entry: keys, state, and who added it (with the adder's signature)."""

    fingerprint: str
    ed_pub: bytes
    x_pub: bytes
    state: MemberState
    added_by: str
    sig: bytes


@attrs.frozen
class RoomEntry:
    """One room you are in, as listed by ``rooms``."""

    room: str
    state: MemberState


@attrs.frozen
class ResumedRoom:
    """Where a resumed room stands: ``first`` is the oldest seq still held, ``head`` the newest."""

    room: str
    first: int
    head: int


# --- client -> relay ---------------------------------------------------------------------------


@attrs.frozen
class Hello:
    ed_pub: bytes
    x_pub: bytes
    device: str
    version: int
    sig: bytes


@attrs.frozen
class Create:
    req: int
    room: str
    sig: bytes


@attrs.frozen
class Add:
    req: int
    room: str
    ed_pub: bytes
    x_pub: bytes
    sig: bytes


@attrs.frozen
class Accept:
    req: int
    room: str


@attrs.frozen
class Decline:
    req: int
    room: str


@attrs.frozen
class Leave:
    req: int
    room: str


@attrs.frozen
class Remove:
    req: int
    room: str
    fingerprint: str


@attrs.frozen
class GetRoster:
    req: int
    room: str


@attrs.frozen
class ListRooms:
    req: int


@attrs.frozen
class Post:
    req: int
    room: str
    op_id: str
    body: bytes


@attrs.frozen
class Ack:
    room: str
    seq: int


@attrs.frozen
class Resume:
    req: int
    cursors: dict[str, int]


@attrs.frozen
class SlotOpen:
    req: int


@attrs.frozen
class SlotJoin:
    req: int
    slot: str


@attrs.frozen
class SlotAttach:
    req: int
    slot: str


@attrs.frozen
class SlotSend:
    req: int
    slot: str
    index: int
    data: bytes


@attrs.frozen
class SlotClose:
    req: int
    slot: str


ClientFrame = Union[  # noqa: UP007 - cattrs' tagged union wants a typing.Union object
    Hello, Create, Add, Accept, Decline, Leave, Remove, GetRoster, ListRooms, Post, Ack, Resume,
    SlotOpen, SlotJoin, SlotAttach, SlotSend, SlotClose,
]

# --- relay -> client ---------------------------------------------------------------------------


@attrs.frozen
class Challenge:
    nonce: bytes
    relay_key: bytes
    version: int


@attrs.frozen
class Ready:
    fingerprint: str
    sig: bytes


@attrs.frozen
class Ok:
    req: int


@attrs.frozen
class Error:
    req: int | None
    code: str
    message: str


@attrs.frozen
class Roster:
    """Reply to ``roster`` and push to joined members whenever the roster changes."""

    req: int | None
    room: str
    members: list[Member]


@attrs.frozen
class RoomList:
    req: int
    rooms: list[RoomEntry]


@attrs.frozen
class Invited:
    """Pushed to the invitee's devices: ``by`` added you to ``room``."""

    room: str
    by: str


@attrs.frozen
class RoomGone:
    """Pushed to a member's devices when it is no longer in the room (removed, left, deleted)."""

    room: str
    reason: str


@attrs.frozen
class Posted:
    req: int
    room: str
    seq: int


@attrs.frozen
class Op:
    room: str
    seq: int
    sender: str
    op_id: str
    body: bytes
    ts: float


@attrs.frozen
class Resumed:
    req: int
    rooms: list[ResumedRoom]
    missing: list[str]


@attrs.frozen
class Slot:
    req: int
    slot: str
    expires_in: float


@attrs.frozen
class SlotJoined:
    """To the owner (pushed): who joined. To the joiner (reply): who owns the slot."""

    req: int | None
    slot: str
    fingerprint: str
    ed_pub: bytes
    x_pub: bytes


@attrs.frozen
class SlotMsg:
    slot: str
    from_side: Side
    index: int
    data: bytes


@attrs.frozen
class SlotClosed:
    slot: str
    reason: str


@attrs.frozen
class Presence:
    fingerprint: str
    online: bool


RelayFrame = Union[  # noqa: UP007 - cattrs' tagged union wants a typing.Union object
    Challenge, Ready, Ok, Error, Roster, RoomList, Invited, RoomGone, Posted, Op, Resumed, Slot,
    SlotJoined, SlotMsg, SlotClosed, Presence,
]

_TAGS: dict[type, str] = {
    Hello: "hello", Create: "create", Add: "add", Accept: "accept", Decline: "decline",
    Leave: "leave", Remove: "remove", GetRoster: "roster", ListRooms: "rooms", Post: "post",
    Ack: "ack", Resume: "resume", SlotOpen: "slot_open", SlotJoin: "slot_join",
    SlotAttach: "slot_attach", SlotSend: "slot_send", SlotClose: "slot_close",
    Challenge: "challenge", Ready: "ready", Ok: "ok", Error: "error", Roster: "roster",
    RoomList: "rooms", Invited: "invited", RoomGone: "room_gone", Posted: "posted", Op: "op",
    Resumed: "resumed", Slot: "slot", SlotJoined: "slot_joined", SlotMsg: "slot_msg",
    SlotClosed: "slot_closed", Presence: "presence",
}
_CLIENT_BY_TAG = {_TAGS[c]: c for c in get_args(ClientFrame)}
_RELAY_BY_TAG = {_TAGS[c]: c for c in get_args(RelayFrame)}

configure_tagged_union(ClientFrame, converter, tag_generator=_TAGS.__getitem__, tag_name="t")
configure_tagged_union(RelayFrame, converter, tag_generator=_TAGS.__getitem__, tag_name="t")


def tag_of(frame: object) -> str:
    """The ``t`` value of a frame instance."""
    return _TAGS[type(frame)]


# --- strict shape check ------------------------------------------------------------------------
# The shared converter coerces (``int("7")``, ``str({...})``); peer data must instead match its
# declared JSON type exactly, so a mistyped field is ``bad_frame`` rather than a silent guess.


def _check(value: Any, tp: Any, where: str) -> None:
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        for option in get_args(tp):
            try:
                _check(value, option, where)
                return
            except RemoteProtocolError:
                continue
        raise RemoteProtocolError(f"{where} has the wrong type", hint="bad_frame")
    if origin is Literal:
        ok = value in get_args(tp)
    elif origin is list:
        ok = isinstance(value, list)
        if ok:
            for i, item in enumerate(value):
                _check(item, get_args(tp)[0], f"{where}[{i}]")
    elif origin is dict:
        ok = isinstance(value, dict)
        if ok:
            for key, item in value.items():
                _check(key, str, f"{where} key")
                _check(item, get_args(tp)[1], f"{where}.{key}")
    elif tp is type(None):
        ok = value is None
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif tp in (str, bytes):
        ok = isinstance(value, str)
    elif attrs.has(tp):
        ok = isinstance(value, dict)
        if ok:
            _check_fields(value, tp, where)
    else:  # pragma: no cover - a model used a type this checker does not know
        raise TypeError(f"unsupported field type {tp!r}")
    if not ok:
        raise RemoteProtocolError(f"{where} has the wrong type", hint="bad_frame")


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any], ...]:
    """Each field's resolved type (resolving string annotations is slow; do it once)."""
    hints = typing.get_type_hints(cls)
    return tuple((field.name, hints[field.name]) for field in attrs.fields(cls))


def _check_fields(data: dict[str, Any], cls: type, where: str) -> None:
    for name, tp in _field_types(cls):
        if name not in data:
            raise RemoteProtocolError(f"{where} lacks {name!r}", hint="bad_frame")
        _check(data[name], tp, f"{where}.{name}")


def _decode(text: str | bytes, by_tag: dict[str, type], union: Any) -> Any:
    if isinstance(text, bytes):
        raise RemoteProtocolError("frames are JSON text, not binary", hint="bad_frame")
    if len(text) > MAX_FRAME:
        raise RemoteProtocolError("frame is larger than 1.5 MiB", hint="too_large")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise RemoteProtocolError("frame is not JSON", hint="bad_frame") from None
    if not isinstance(data, dict):
        raise RemoteProtocolError("frame is not a JSON object", hint="bad_frame")
    tag = data.get("t")
    cls = by_tag.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise RemoteProtocolError(f"unknown frame type {str(tag)[:40]!r}", hint="bad_frame")
    _check_fields(data, cls, str(tag))
    try:
        return converter.structure(data, union)
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise RemoteProtocolError(f"malformed {tag}: {exc}"[:200], hint="bad_frame") from None


def decode_client_frame(text: str | bytes) -> ClientFrame:
    """Parse one frame a client sent; raises RemoteProtocolError with ``hint`` = error code."""
    frame: ClientFrame = _decode(text, _CLIENT_BY_TAG, ClientFrame)
    return frame


def decode_relay_frame(text: str | bytes) -> RelayFrame:
    """Parse one frame the relay sent; raises RemoteProtocolError with ``hint`` = error code."""
    frame: RelayFrame = _decode(text, _RELAY_BY_TAG, RelayFrame)
    return frame


def encode_frame(frame: ClientFrame | RelayFrame) -> str:
    """One frame as compact JSON text, ``t`` included."""
    union = ClientFrame if type(frame) in _CLIENT_BY_TAG.values() else RelayFrame
    data = converter.unstructure(frame, union)
    return json.dumps(data, separators=(",", ":"))
