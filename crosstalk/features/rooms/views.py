"""Named rooms as the ``rooms`` op shows them, and the params and replies of the room ops."""

from __future__ import annotations

import sqlite3

from crosstalk.errors import (
    UnknownRoom,
)
from crosstalk.store import membership as mq
from crosstalk.store import membership_chain as mc
from crosstalk.store.rooms import (
    Room,
    find_contact,
    list_rooms,
    members,
)
from crosstalk.wire.control.replies.rooms import MemberView, RoomsReply, RoomView


def find_room(conn: sqlite3.Connection, name_or_id: str) -> Room:
    """A room by its name (``#name`` works too) or id."""
    wanted = name_or_id.removeprefix("#")
    for room in list_rooms(conn):
        if wanted in (room.name, room.room_id):
            return room
    raise UnknownRoom(f"You are in no room called {name_or_id!r}; `crosstalk room` lists them.")


def room_views(conn: sqlite3.Connection, me: str) -> RoomsReply:
    views = []
    for room in list_rooms(conn):
        roster = []
        for m in members(conn, room.room_id):
            contact = find_contact(conn, m.fingerprint)
            known = contact is not None or m.fingerprint == me
            label = contact.label if contact is not None else m.label
            roster.append(MemberView(label, m.fingerprint, m.state, None if known else room.name))
        removal = mq.removal(conn, room.room_id)
        state = "removed" if removal else room.state
        alarm = mc.alarm(conn, room.room_id)
        pending = room.state == "invited"
        by, via = mq.invitation_from(conn, room.room_id) if pending else (None, None)
        views.append(
            RoomView(room.name, room.room_id, room.kind, pending, roster, state,
                     removal[1] if removal else None, alarm[1] if alarm else None,
                     alarm[0] if alarm else None, by, via)
        )
    return RoomsReply(views)
