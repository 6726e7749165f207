"""Relay room-membership frames: rosters, invitations, and who is online.

Requests: ``create {room, sig}`` (the creator's own roster entry, self-signed), ``add {room,
ed_pub, x_pub, sig}`` (sig by the adder over ``member_transcript``), ``accept``, ``decline``,
``leave``, ``remove {room, fingerprint}``, ``roster {room, have}``, ``rooms {}`` (which lists
invitations too). Pushes: ``roster`` to joined members whenever the roster changes, ``invited``
to the invitee, ``room_gone`` to whoever is no longer in a room, ``presence``.

Every change carries ``stmt``, the member's signed statement of it (:mod:`crosstalk.wire.chain`),
which the relay appends to the room's membership history; members believe the history, not the
relay's rows. A ``roster`` reply carries the statements from index ``have`` on; a push carries
the one the change added (``chain_from`` is the index of the first statement given).

Only a joined member may add, and only someone it shares a joined room with, or someone it has
just met through a pairing slot (that counts for one add, 15 minutes). Any joined member may
remove another; the room is deleted with its log when no joined member is left.
Import these names through :mod:`crosstalk.wire.relay`, which also holds the codec.
"""

from __future__ import annotations

from typing import Literal

import attrs

from crosstalk.wire.chain import Statement

# "left": a joined member who has since left or been removed. The relay keeps their entry (up to
# relay.rooms.MAX_DEPARTED a room) so that a member who was away through their whole stay can
# still verify the ops they signed; a "left" entry grants nothing at the relay.
MemberState = Literal["invited", "joined", "left"]


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


# --- client -> relay ---------------------------------------------------------------------------


@attrs.frozen
class Create:
    req: int
    room: str
    sig: bytes
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class Add:
    req: int
    room: str
    ed_pub: bytes
    x_pub: bytes
    sig: bytes
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class Accept:
    req: int
    room: str
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class Decline:
    req: int
    room: str
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class Leave:
    req: int
    room: str
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class Remove:
    req: int
    room: str
    fingerprint: str
    stmt: Statement | None = None  # required by the relay; None only to say it is missing


@attrs.frozen
class GetRoster:
    req: int
    room: str
    have: int = 0  # membership statements the asker holds: the reply starts there


@attrs.frozen
class ListRooms:
    req: int


# --- relay -> client ---------------------------------------------------------------------------


@attrs.frozen
class Roster:
    """Reply to ``roster`` (every row: the invited and joined, then the departed, state ``left``)
    and push to joined members whenever the roster changes (the rows of the members the change
    names, with the statements it added)."""

    req: int | None
    room: str
    members: list[Member]
    chain: list[Statement] = attrs.Factory(list)
    chain_from: int = 0


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
    """Pushed to a member's devices when it is no longer in the room (removed, left, deleted).

    ``by`` is the fingerprint of whoever removed them (None for any other reason).
    """

    room: str
    reason: str
    by: str | None = None


@attrs.frozen
class Presence:
    fingerprint: str
    online: bool
