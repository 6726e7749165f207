"""Frames between a daemon and the relay: the one import path for all of them, and the codec.

Transport: one WebSocket at ``/ws``; every message is a JSON text frame holding one object whose
``"t"`` field names the frame. Bytes travel as standard base64. Unknown fields are ignored; a
missing or mistyped field, an unknown ``t`` or anything that is not a JSON object is answered with
``error {code: "bad_frame"}``.

The frames are defined by concern, each module describing its part of the protocol:

* :mod:`crosstalk.wire.relay_handshake`   ``challenge``, ``hello``, ``ready`` (nothing else is
  accepted before ``ready``);
* :mod:`crosstalk.wire.relay_transcripts` the byte strings both sides sign;
* :mod:`crosstalk.wire.relay_rooms`       membership: create, add, accept, rosters, presence;
* :mod:`crosstalk.wire.relay_log`         each room's op log: post, op, ack, resume;
* :mod:`crosstalk.wire.relay_slots`       pairing slots;
* :mod:`crosstalk.wire.relay_shape`       the strict JSON shape check decoding starts with.

This module holds the replies every request may get (``ok``, ``error``), the two tagged unions,
and encode/decode. Callers import every relay frame from here (``from crosstalk.wire import
relay as w``), so there is one name for each.

Requests carry an integer ``req`` chosen by the client; each gets exactly one reply carrying the
same ``req``: ``ok``, a typed result (``roster``, ``rooms``, ``posted``, ``resumed``, ``slot``,
``slot_joined``) or ``error {req, code, message}``. ``ack`` has no reply unless it fails.
Pushes (``req`` absent or null): ``op``, ``roster``, ``invited``, ``room_gone``, ``presence``,
``slot_joined``, ``slot_msg``, ``slot_closed``. Only ops are stored for absent devices; other
pushes go to whoever is connected, so a client that (re)connects sends ``resume``, then asks
``rooms`` (which lists invitations too) and ``roster`` for each room to catch up.

Limits: op body 1 MiB, frame 1.5 MiB, per-identity op rate, per-room backlog of unacknowledged ops
(``backlog_full``). 20 malformed or unauthenticated frames close that connection.

Error codes (stable): see :data:`ERROR_CODES`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Union, get_args

import attrs
from cattrs.errors import BaseValidationError

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, tagged_union
from crosstalk.wire.relay_handshake import NONCE_SIZE, PROTOCOL_VERSION, Challenge, Hello, Ready
from crosstalk.wire.relay_log import (
    MAX_OP_BODY,
    Ack,
    Op,
    Post,
    Posted,
    Resume,
    Resumed,
    ResumedRoom,
)
from crosstalk.wire.relay_rooms import (
    Accept,
    Add,
    Create,
    Decline,
    GetRoster,
    Invited,
    Leave,
    ListRooms,
    Member,
    MemberState,
    Presence,
    Remove,
    RoomEntry,
    RoomGone,
    RoomList,
    Roster,
)
from crosstalk.wire.relay_shape import check_fields
from crosstalk.wire.relay_slots import (
    MAX_SLOT_DATA,
    MAX_SLOT_INDEX,
    Side,
    Slot,
    SlotAttach,
    SlotClose,
    SlotClosed,
    SlotJoin,
    SlotJoined,
    SlotMsg,
    SlotOpen,
    SlotSend,
    Work,
    WorkAsk,
)
from crosstalk.wire.relay_transcripts import hello_transcript, member_transcript, ready_transcript

__all__ = [
    "ERROR_CODES", "MAX_FRAME", "MAX_OP_BODY", "MAX_SLOT_DATA", "MAX_SLOT_INDEX", "NONCE_SIZE",
    "PROTOCOL_VERSION", "Accept", "Ack", "Add", "Challenge", "ClientFrame", "Create", "Decline",
    "Error", "GetRoster", "Hello", "Invited", "Leave", "ListRooms", "Member", "MemberState", "Ok",
    "Op", "Post", "Posted", "Presence", "Ready", "RelayFrame", "Remove", "Resume", "Resumed",
    "ResumedRoom", "RoomEntry", "RoomGone", "RoomList", "Roster", "Side", "Slot", "SlotAttach",
    "SlotClose", "SlotClosed", "SlotJoin", "SlotJoined", "SlotMsg", "SlotOpen", "SlotSend",
    "Work", "WorkAsk",
    "decode_client_frame", "decode_relay_frame", "encode_frame", "hello_transcript",
    "member_transcript", "ready_transcript", "tag_of",
]

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
    "stale_chain",  # a membership statement signed before the history moved on: fetch, sign again
    "bad_statement",  # a membership statement that does not follow from the room's history
    "work_required",  # slot_open/slot_join by a stranger without the proof of work asked for
)


@attrs.frozen
class Ok:
    req: int


@attrs.frozen
class Error:
    req: int | None
    code: str
    message: str


ClientFrame = Union[  # noqa: UP007 - cattrs' tagged union wants a typing.Union object
    Hello, Create, Add, Accept, Decline, Leave, Remove, GetRoster, ListRooms, Post, Ack, Resume,
    SlotOpen, SlotJoin, SlotAttach, SlotSend, SlotClose, WorkAsk,
]

RelayFrame = Union[  # noqa: UP007 - cattrs' tagged union wants a typing.Union object
    Challenge, Ready, Ok, Error, Roster, RoomList, Invited, RoomGone, Posted, Op, Resumed, Slot,
    SlotJoined, SlotMsg, SlotClosed, Presence, Work,
]

_TAGS: dict[type, str] = {
    Hello: "hello", Create: "create", Add: "add", Accept: "accept", Decline: "decline",
    Leave: "leave", Remove: "remove", GetRoster: "roster", ListRooms: "rooms", Post: "post",
    Ack: "ack", Resume: "resume", SlotOpen: "slot_open", SlotJoin: "slot_join",
    SlotAttach: "slot_attach", SlotSend: "slot_send", SlotClose: "slot_close",
    Challenge: "challenge", Ready: "ready", Ok: "ok", Error: "error", Roster: "roster",
    RoomList: "rooms", Invited: "invited", RoomGone: "room_gone", Posted: "posted", Op: "op",
    Resumed: "resumed", Slot: "slot", SlotJoined: "slot_joined", SlotMsg: "slot_msg",
    SlotClosed: "slot_closed", Presence: "presence", WorkAsk: "work_ask", Work: "work",
}
_CLIENT_BY_TAG = {_TAGS[c]: c for c in get_args(ClientFrame)}
_RELAY_BY_TAG = {_TAGS[c]: c for c in get_args(RelayFrame)}

tagged_union(ClientFrame, tag_generator=_TAGS.__getitem__, tag_name="t")
tagged_union(RelayFrame, tag_generator=_TAGS.__getitem__, tag_name="t")


def tag_of(frame: object) -> str:
    """The ``t`` value of a frame instance."""
    return _TAGS[type(frame)]


# Each frame class's own cattrs hooks, looked up once. Going through the tagged union instead,
# cattrs hashed the whole Union (seventeen members) to find its hook on every frame: about half
# of the relay's decoding of a post, and as much again of encoding a ``posted`` reply. The tagged
# union's hooks are these same hooks, the tag added last on the way out and ignored on the way
# in (the converter does not forbid extra keys), so the text is the same byte for byte.
_STRUCTURE: dict[type, Callable[[Any, type], Any]] = {}
_UNSTRUCTURE: dict[type, Callable[[Any], dict[str, Any]]] = {}
_JSON = json.JSONEncoder(separators=(",", ":"))  # json.dumps builds one per call otherwise


def _decode(text: str | bytes, by_tag: dict[str, type]) -> Any:
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
    check_fields(data, cls, str(tag))
    structure = _STRUCTURE.get(cls)
    if structure is None:
        structure = _STRUCTURE[cls] = converter.get_structure_hook(cls)
    try:
        return structure(data, cls)
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise RemoteProtocolError(f"malformed {tag}: {exc}"[:200], hint="bad_frame") from None


def decode_client_frame(text: str | bytes) -> ClientFrame:
    """Parse one frame a client sent; raises RemoteProtocolError with ``hint`` = error code."""
    frame: ClientFrame = _decode(text, _CLIENT_BY_TAG)
    return frame


def decode_relay_frame(text: str | bytes) -> RelayFrame:
    """Parse one frame the relay sent; raises RemoteProtocolError with ``hint`` = error code."""
    frame: RelayFrame = _decode(text, _RELAY_BY_TAG)
    return frame


def encode_frame(frame: ClientFrame | RelayFrame) -> str:
    """One frame as compact JSON text, ``t`` included (last, as the tagged union puts it)."""
    kind = type(frame)
    unstructure = _UNSTRUCTURE.get(kind)
    if unstructure is None:
        unstructure = _UNSTRUCTURE[kind] = converter.get_unstructure_hook(kind)
    data = unstructure(frame)
    data["t"] = _TAGS[kind]
    return _JSON.encode(data)
