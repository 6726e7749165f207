"""The replies of the pairing, room and peer ops.

Each is the model of one op's reply in the op table (:mod:`crosstalk.wire.control.table`),
or a view nested in one; the daemon unstructures it through the one converter.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class LinkedLine:
    linked: bool
    fingerprint: str
    label: str
    rooms: int


@attrs.frozen
class JoinedLine:
    joined: str
    room: str
    them: str
    you: str


@attrs.frozen
class EditedView:
    """A file a session's agent wrote lately (``crosstalk.features.edits``)."""

    repo: str
    path: str
    edited_at: float


@attrs.frozen
class SessionView:
    name: str
    project: str
    status: str
    last_seen: float | None = None
    edits: list[EditedView] = attrs.Factory(list)


@attrs.frozen
class Me:
    label: str
    fingerprint: str
    sessions: list[SessionView]


@attrs.frozen
class PeerView:
    label: str
    fingerprint: str
    online: bool
    machine: str
    level: str
    muted: bool
    unread: int
    agent: bool
    sessions: list[SessionView]
    via: str | None = None  # the room we know them through, if we never paired with them


@attrs.frozen
class PeersReply:
    me: Me
    peers: list[PeerView]


@attrs.frozen
class RenameReply:
    renamed: str
    to: str


@attrs.frozen
class CostRow:
    peer: str
    sent: int
    received: int
    delivered_to_agent: int
    tokens_out: int
    tokens_in: int


@attrs.frozen
class CostReply:
    rows: list[CostRow]


@attrs.frozen
class InviteReply:
    room: str
    invited: list[str]


@attrs.frozen
class KickReply:
    room: str
    removed: str
    epoch: int


@attrs.frozen
class RoomReply:
    room: str
    id: str
    state: str


@attrs.frozen
class MemberView:
    label: str
    fingerprint: str
    state: str
    via: str | None = None  # the room we know them through, if we never paired with them


@attrs.frozen
class RoomView:
    name: str
    id: str
    kind: str
    pending: bool
    members: list[MemberView]
    state: str = "joined"  # "joined", "invited" or "removed"
    removed_by: str | None = None
    # What the relay offered about this room's membership that did not verify (a fork, a
    # change nobody signed, a roster the signed history does not give), and when (Unix time).
    relay_alarm: str | None = None
    relay_alarm_at: float | None = None
    # A pending invitation: who sent it, and the named room it came through (None: a room of
    # two with them, or not known).
    invited_by: str | None = None
    invited_via: str | None = None


@attrs.frozen
class RoomsReply:
    rooms: list[RoomView]


@attrs.frozen
class InviteLine:
    invite: str
    expires_in: int
    note: str | None = None  # who can join, when that is not obvious
