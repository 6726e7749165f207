"""Named rooms: create, invite, accept, decline, leave, kick (with a new key epoch), list.

Membership lives on the relay (who may receive a room's ops); keys live only with members.
An invitation travels in the inviter's room of two with the invitee, as a signed, sealed op
carrying the room key sealed once more to the invitee's X25519 key; nothing from the room
reaches the invitee until they accept. Removing a member starts a new epoch: the remover posts a
``Rekey`` op (under the old epoch, after the relay has dropped the removed member) carrying the
new key sealed to each remaining member, so nothing sent afterwards opens for the removed one.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time

import nacl.utils

from crosstalk import sim_hooks
from crosstalk.actors.relay_client import RelayClient
from crosstalk.core.room import Applied
from crosstalk.errors import (
    CrosstalkError,
    NotAMember,
    NotInvited,
    UnknownRoom,
    UsageError,
)
from crosstalk.features.caps import Capabilities as Daemon
from crosstalk.features.feature import Plugs, op
from crosstalk.features.membership.actor import refresh_rooms
from crosstalk.features.membership.history import request_change, with_statement
from crosstalk.features.membership.lifecycle import (
    create_on_relay,
    finish_join,
    relay_room_state,
    relay_says_joined,
)
from crosstalk.features.membership.names import Names
from crosstalk.features.rooms.appliers import adopt_invitation, apply_rekey, key_listener
from crosstalk.features.rooms.invite import invite_one
from crosstalk.features.rooms.kick import remove_member
from crosstalk.features.rooms.views import find_room, room_views
from crosstalk.store import membership as mq
from crosstalk.store import room_keys
from crosstalk.store.rooms import (
    Room,
    RoomMember,
    add_member,
    add_room,
    list_rooms,
)
from crosstalk.wire import relay as w
from crosstalk.wire.control.params import (
    CreateParams,
    InviteParams,
    KickParams,
    NoParams,
    ReleaseParams,
    RoomParams,
)
from crosstalk.wire.control.replies.memory import ReleaseReply
from crosstalk.wire.control.replies.rooms import InviteReply, KickReply, RoomReply, RoomsReply
from crosstalk.wire.control.table import (
    ROOM_ACCEPT,
    ROOM_CREATE,
    ROOM_DECLINE,
    ROOM_INVITE,
    ROOM_KICK,
    ROOM_LEAVE,
    ROOMS,
)
from crosstalk.wire.control.table_memory import RELEASE

log = logging.getLogger(__name__)


async def _invited_back(daemon: Daemon, relay: RelayClient, room_id: str) -> bool:
    """Removed from ``room_id``, and the relay has us invited again (the invitation may have
    been applied here before the removal was heard): the room is pending once more."""
    if room_id not in await daemon.store.read(mq.removed_rooms):
        return False
    if await relay_room_state(relay, room_id) != "invited":
        return False
    await daemon.store.write(lambda c: mq.invited_again(c, room_id))
    return True


async def list_named(daemon: Daemon, _: NoParams) -> RoomsReply:
    me = daemon.keys.fingerprint if daemon.identity is not None else ""
    return await daemon.store.read(lambda c: room_views(c, me))


async def create(daemon: Daemon, params: CreateParams) -> RoomReply:
    name = params.name.strip().removeprefix("#")
    if not name or len(name) > 64:
        raise UsageError("A room name is 1 to 64 characters.")
    keys, me = daemon.keys, daemon.require_identity()
    if name in {r.name for r in await daemon.store.read(list_rooms)}:
        raise UsageError(f"You already have a room called {name!r}.")
    room_id = nacl.utils.random(16).hex()

    def record(conn: sqlite3.Connection) -> None:
        add_room(
            conn, Room(room_id, name, "shared", "joined", 0, time.time()), nacl.utils.random(32)
        )
        add_member(conn, RoomMember(room_id, keys.fingerprint, me.label, keys.ed_pub,
                                    keys.x_pub, "member", keys.fingerprint))
        mq.set_create_pending(conn, room_id, True)

    # Here first, then at the relay: an answer lost on the way back leaves a room that the
    # next link-up creates at the relay again, never a relay room with no key anywhere.
    await daemon.store.write(record)
    confirmed = False
    try:
        await create_on_relay(await daemon.relay(), keys, room_id)
        confirmed = True
    except CrosstalkError as exc:
        if exc.code != "relay_unreachable":
            await daemon.store.write(lambda c: room_keys.forget_room(c, room_id))
        raise
    finally:
        if not confirmed:
            sim_hooks.probe("rooms.create_unconfirmed")
            # Unanswered (or the caller gave up): the room waits here, and a reconcile creates
            # it at the relay once the relay answers, retried while it does not. Left to the
            # next link-up, a link that stayed up through a slow spell never made it (sim seed
            # 1934).
            refresh_rooms(daemon.membership)
    await daemon.store.write(lambda c: mq.set_create_pending(c, room_id, False))
    await daemon.room_inbox(room_id)
    return RoomReply(name, room_id, "joined")


async def invite(daemon: Daemon, params: InviteParams) -> InviteReply:
    room = await daemon.store.read(lambda c: find_room(c, params.room))
    if room.state != "joined":
        raise NotAMember(f"You have not joined {room.name}; accept it first.")
    invited = [await invite_one(daemon, room, who) for who in params.peers]
    return InviteReply(room.name, invited)


def _invited_room(conn: sqlite3.Connection, name: str) -> Room:
    """The room an accept or decline names; no room by that name is no invitation to it."""
    try:
        return find_room(conn, name)
    except UnknownRoom:
        raise NotInvited(
            f"You have no invitation to {name!r}; `crosstalk room` lists the pending ones."
        ) from None


async def accept(daemon: Daemon, params: RoomParams) -> RoomReply:
    room = await daemon.store.read(lambda c: _invited_room(c, params.room))
    relay = await daemon.relay()
    if room.state != "invited" and not await _invited_back(daemon, relay, room.room_id):
        raise NotInvited(f"There is no pending invitation to {room.name}.")
    try:
        await request_change(daemon, room.room_id, "accept", daemon.keys.fingerprint,
                             with_statement(w.Accept(0, room.room_id)), fetch_first=True,
                             relay=relay)
    except CrosstalkError as exc:
        # An earlier accept whose answer was lost: the relay has us joined already.
        if exc.code != "not_invited" or not await relay_says_joined(relay, room.room_id):
            raise
        sim_hooks.probe("rooms.accept_already_joined")
    await finish_join(daemon, room.room_id)
    return RoomReply(room.name, room.room_id, "joined")


async def decline(daemon: Daemon, params: RoomParams) -> RoomReply:
    room = await daemon.store.read(lambda c: _invited_room(c, params.room))
    if room.state != "invited":
        raise NotInvited(f"There is no pending invitation to {room.name}.")
    await request_change(daemon, room.room_id, "decline", daemon.keys.fingerprint,
                         with_statement(w.Decline(0, room.room_id)), fetch_first=True)
    await daemon.store.write(lambda c: room_keys.forget_room(c, room.room_id))
    return RoomReply(room.name, room.room_id, "declined")


async def leave(daemon: Daemon, params: RoomParams) -> RoomReply:
    room = await daemon.store.read(lambda c: find_room(c, params.room))
    await _give_back_reservations(daemon, room.room_id)
    try:
        await request_change(daemon, room.room_id, "leave", daemon.keys.fingerprint,
                             with_statement(w.Leave(0, room.room_id)))
    except CrosstalkError as exc:
        if exc.code not in {"unknown_room", "not_a_member"}:
            raise
    await daemon.forget_room(room.room_id)
    await daemon.store.write(lambda c: room_keys.forget_room(c, room.room_id))
    return RoomReply(room.name, room.room_id, "left")


async def _give_back_reservations(daemon: Daemon, room_id: str) -> None:
    """Release what we hold in the room before leaving it: a leave is not in the room log, the
    release is, so every replica lets our reservations go at the same point. A relay that does
    not sequence it in time leaves them to lapse at their expiry instead (said in the log)."""
    if not daemon.ops.has("release"):
        return
    try:
        reply = await daemon.ops.run(RELEASE, ReleaseParams(room=room_id), ReleaseReply)
    except CrosstalkError as exc:
        log.info("room %s: reservations not released before leaving: %s", room_id, exc.message)
        return
    if reply.pending:
        log.info("room %s: the release before leaving was not sequenced in time", room_id)


async def kick(daemon: Daemon, params: KickParams) -> KickReply:
    return await remove_member(daemon, params.room, params.peer)


def adopt(daemon: Daemon, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier and key taker: an invitation sealed to us gives us its room and key."""
    adopt_invitation(conn, applied, daemon.keys)


def rekey(daemon: Daemon, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier and key taker: a rekey brings the next epoch's key (and marks whom it removed
    gone)."""
    apply_rekey(conn, applied, daemon.keys)


def plug(daemon: Daemon) -> Plugs:
    """The named-room ops, the appliers of invitations, rekeys and names, and the key listener."""
    rekeyed = functools.partial(rekey, daemon)
    names = Names()
    return Plugs(
        ops=(
            op(ROOMS, functools.partial(list_named, daemon)),
            op(ROOM_CREATE, functools.partial(create, daemon)),
            op(ROOM_INVITE, functools.partial(invite, daemon)),
            op(ROOM_ACCEPT, functools.partial(accept, daemon)),
            op(ROOM_DECLINE, functools.partial(decline, daemon)),
            op(ROOM_LEAVE, functools.partial(leave, daemon)),
            op(ROOM_KICK, functools.partial(kick, daemon)),
        ),
        appliers=(functools.partial(adopt, daemon), rekeyed, names.apply),
        apply_scopes=(names.batch,),
        key_takers=(rekeyed,),
        applied_listeners=(functools.partial(key_listener, daemon),),
    )
