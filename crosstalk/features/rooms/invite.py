"""Inviting someone to a named room: add them at the relay, name them, send the invitation
(through our room of two, or through a named room we share with someone we never paired with)."""

from __future__ import annotations

import sqlite3

from crosstalk import crypto
from crosstalk.errors import (
    CrosstalkError,
    UsageError,
)
from crosstalk.features.caps import Capabilities as Daemon
from crosstalk.features.membership.actor import fetch_roster
from crosstalk.features.membership.history import request_change, with_statement
from crosstalk.features.membership.keys import invitation as invitation_op
from crosstalk.features.rooms.invitee import Invitee, invitee
from crosstalk.store.rooms import (
    Room,
    RoomMember,
    add_member,
    members,
)
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import MemberNamed, RoomInvite


def _invitation(conn: sqlite3.Connection, room: Room, contact: Invitee, inviter: str) -> RoomInvite:
    """Record the invitee as invited and build the op that tells them (with the sealed key)."""
    add_member(
        conn,
        RoomMember(
            room.room_id,
            contact.fingerprint,
            contact.label,
            contact.ed_pub,
            contact.x_pub,
            "invited",
            inviter,
        ),
    )
    return invitation_op(conn, room.room_id, contact.fingerprint)


async def invite_one(daemon: Daemon, room: Room, who: str) -> str:
    """Add ``who`` on the relay, name them in the room, then send them the invitation in our
    room of two, or (someone we never paired with) in the named room we share with them
    (:mod:`crosstalk.features.rooms.invitee`). Inviting someone already invited sends the
    invitation again."""
    keys = daemon.keys
    contact = await daemon.store.read(lambda c: invitee(c, who, me=keys.fingerprint))
    transcript = w.member_transcript(room.room_id, contact.ed_pub, contact.x_pub)
    add = w.Add(0, room.room_id, contact.ed_pub, contact.x_pub, crypto.sign(keys, transcript))
    relay = await daemon.relay()
    try:
        await request_change(daemon, room.room_id, "invite", contact.fingerprint,
                             with_statement(add), ed_pub=contact.ed_pub,
                             x_pub=contact.x_pub, relay=relay)
    except CrosstalkError as exc:
        if exc.code != "already_member":
            raise
        roster = await daemon.store.read(lambda c: members(c, room.room_id))
        if any(m.fingerprint == contact.fingerprint and m.state == "member" for m in roster):
            raise UsageError(f"{contact.label} is already in {room.name}.") from None
    op = await daemon.store.write(lambda c: _invitation(c, room, contact, keys.fingerprint))
    # Members who never paired with them learn their name from us (the roster has none).
    await daemon.send_op(room.room_id, MemberNamed({contact.fingerprint: contact.label}))
    await daemon.send_op(contact.deliver_in, op)
    # The row written above is our guess; the relay's roster is the truth (they may have
    # declined an earlier invitation just as this one went out: seed 92 of the simulation).
    await fetch_roster(daemon.store, relay, daemon.membership, room.room_id)
    return contact.label
