"""What named rooms apply from the log: invitations, rekeys; and what they do after a commit
(wake a room whose key came by invitation, welcome a joiner by name, pass a rekey on)."""

from __future__ import annotations

import functools
import logging
import sqlite3
import time

from crosstalk import crypto
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError
from crosstalk.features.caps import Capabilities as Daemon
from crosstalk.features.membership.actor import fetch_roster
from crosstalk.features.membership.keys import (
    key_context,
    share_with_stranded,
    take_sealed_key,
)
from crosstalk.features.membership.names import welcome
from crosstalk.features.rooms.invitee import met_through
from crosstalk.features.rooms.kick import rekeyed_at_once
from crosstalk.store import membership as mq
from crosstalk.store import room_keys
from crosstalk.store.rooms import (
    Room,
    RoomMember,
    add_member,
    add_room,
    find_contact,
    list_rooms,
    members,
)
from crosstalk.wire.room_ops import MemberNamed, Rekey, RoomInvite

log = logging.getLogger(__name__)


def adopt_invitation(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> None:
    """Applier: an invitation sealed to us becomes a pending room here.

    It comes in our room of two with someone we paired with, or in a named room from a joined
    member of that room's verified history (:func:`met_through`): someone we met there, who may
    invite us to the next room. We keep who invited us and through which room, to show.
    """
    op = applied.op
    if not isinstance(op, RoomInvite) or op.room_id == applied.room_id:
        return
    via = None
    if find_contact(conn, applied.sender) is None:
        if not met_through(conn, applied.room_id, applied.sender, keys.fingerprint):
            return  # invitations come only from people we paired with or share a room with
        via = applied.room_id
    try:
        key = crypto.open_sealed(keys, op.sealed_key, context=key_context(op.room_id, op.epoch))
    except crypto.OpenFailed:
        return  # not sealed to us: ignore it
    if mq.room_is_ours(conn, op.room_id):
        # Sent again with a newer key (a rekey we could not read): take it, if the sender is in
        # the room (any member could post a rekey there as well).
        if any(m.fingerprint == applied.sender for m in members(conn, op.room_id)):
            room_keys.take_key(conn, op.room_id, op.epoch, key)
        return
    if mq.room_exists(conn, op.room_id):  # left or removed before: invited back
        room_keys.reopen_room(conn, op.room_id, op.epoch, key)
    else:
        names = {r.name for r in list_rooms(conn)}
        name = op.name if op.name not in names else f"{op.name}-{op.room_id[:6]}"
        add_room(conn, Room(op.room_id, name, "shared", "invited", op.epoch, time.time()), key)
    mq.invited_through(conn, op.room_id, applied.sender, via, op.epoch)
    for m in op.members:
        known = find_contact(conn, m.fingerprint)
        label = known.label if known else m.label
        state = "invited" if m.fingerprint == keys.fingerprint else "member"
        add_member(
            conn,
            RoomMember(op.room_id, m.fingerprint, label, m.ed_pub, m.x_pub, state, applied.sender),
        )


def apply_rekey(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> None:
    """Applier: a member was removed; take the next epoch's key if it was sealed to us."""
    op = applied.op
    if not isinstance(op, Rekey):
        return
    # Gone, not deleted: what they signed before the removal must still verify here. Gone at
    # once, because the relay's roster saying so may come later (another actor applies it) and
    # the key listener must not pass the new key to them; _roster_now then lists them again
    # if someone invited them back after the removal.
    room_keys.mark_gone(conn, applied.room_id, op.removed)
    take_sealed_key(conn, keys, applied.room_id, op.epoch, op.sealed)


async def key_listener(daemon: Daemon, applied: list[Applied]) -> None:
    """After a commit: wake a room whose key came by invitation; pass a rekey on to the members
    we added who cannot read it."""
    for entry in applied:
        try:
            await _after(daemon, entry)
        except CrosstalkError as exc:
            # Removed from the room meanwhile, say: nothing to send there any more. (Raised, it
            # took the fan-out actor down with every other listener: sim seed 297.)
            log.info("room %s: not answered: %s", entry.room_id, exc.message)


async def _after(daemon: Daemon, entry: Applied) -> None:
    if isinstance(entry.op, RoomInvite):
        await daemon.wake_room(entry.op.room_id)
    elif isinstance(entry.op, MemberNamed):
        names = await daemon.store.read(
            functools.partial(welcome, applied=entry, me=daemon.keys.fingerprint)
        )
        if names is not None:
            await daemon.send_op(entry.room_id, names)
    elif isinstance(entry.op, Rekey):
        if not await _roster_now(daemon, entry.room_id):
            return
        await share_with_stranded(
            daemon.store, daemon.send_op, entry.room_id, daemon.keys.fingerprint,
            entry.op.sealed, entry.op.removed,
        )
        await rekeyed_at_once(daemon, entry, entry.op)


async def _roster_now(daemon: Daemon, room_id: str) -> bool:
    """Bring the room's roster to the relay's before passing a rekey on; False if we are no
    longer in the room. Applying the rekey marked its removed member gone, but someone may have
    invited them back after the removal: the relay's roster lists them again (the push that
    said so may have been applied before the rekey), and whoever invited them owes them the new
    key (sim seed 7089). Fetched after the rekey was sequenced, the relay's roster is at least
    as new as the removal, so a member it lists was not removed by this rekey."""
    try:
        return await fetch_roster(
            daemon.store, await daemon.relay(), daemon.membership, room_id
        )
    except CrosstalkError as exc:
        # Passed on to the roster as we hold it; the next refresh brings the rest.
        log.info("room %s: roster not fetched after a rekey: %s", room_id, exc.message)
        return True

