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
from collections.abc import Awaitable, Callable

import attrs
import nacl.utils

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.core.room import Applied
from crosstalk.errors import (
    CrosstalkError,
    DirectRoom,
    NotAMember,
    NotInvited,
    UnknownRoom,
    UsageError,
)
from crosstalk.features.caps import Capabilities as Daemon
from crosstalk.features.feature import Feature, Plugs, op
from crosstalk.features.membership.actor import fetch_roster
from crosstalk.features.membership.keys import invitation as invitation_op
from crosstalk.features.membership.keys import (
    key_context,
    seal_key,
    share_with_stranded,
    take_sealed_key,
)
from crosstalk.features.membership.lifecycle import (
    create_on_relay,
    finish_join,
    relay_room_state,
    relay_says_joined,
)
from crosstalk.features.membership.names import apply_names, welcome
from crosstalk.features.membership.rekey import minted_clash
from crosstalk.store import membership as mq
from crosstalk.store import room_keys
from crosstalk.store.rooms import (
    Contact,
    Room,
    RoomMember,
    add_member,
    add_room,
    contact_named,
    direct_room_with,
    find_contact,
    get_room,
    list_rooms,
    members,
)
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import MemberNamed, Rekey, RoomInvite

log = logging.getLogger(__name__)


@attrs.frozen
class RoomParams:
    room: str


@attrs.frozen
class CreateParams:
    name: str


@attrs.frozen
class InviteParams:
    room: str
    peers: list[str]


@attrs.frozen
class KickParams:
    room: str
    peer: str


@attrs.frozen
class NoParams:
    pass


@attrs.frozen
class RoomReply:
    room: str
    id: str
    state: str


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


@attrs.frozen
class RoomsReply:
    rooms: list[RoomView]


def find_room(conn: sqlite3.Connection, name_or_id: str) -> Room:
    """A room by its name (``#name`` works too) or id."""
    wanted = name_or_id.removeprefix("#")
    for room in list_rooms(conn):
        if wanted in (room.name, room.room_id):
            return room
    raise UnknownRoom(f"You are in no room called {name_or_id!r}; `crosstalk room` lists them.")


def _views(conn: sqlite3.Connection, me: str) -> RoomsReply:
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
        views.append(
            RoomView(room.name, room.room_id, room.kind, room.state == "invited", roster, state,
                     removal[1] if removal else None)
        )
    return RoomsReply(views)


def adopt_invitation(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> None:
    """Applier: an invitation that arrived in a room of two becomes a pending room here."""
    op = applied.op
    if not isinstance(op, RoomInvite):
        return
    inviter = find_contact(conn, applied.sender)
    if inviter is None:
        return  # invitations come only from people we paired with
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
    # Gone, not deleted: what they signed before the removal must still verify here.
    room_keys.mark_gone(conn, applied.room_id, op.removed)
    take_sealed_key(conn, keys, applied.room_id, op.epoch, op.sealed)


def _invitation(conn: sqlite3.Connection, room: Room, contact: Contact, inviter: str) -> RoomInvite:
    """Record the invitee as invited and build the op that tells them (with the sealed key)."""
    add_member(
        conn,
        RoomMember(
            room.room_id,
            contact.fingerprint,
            contact.label,
            contact.signing_key,
            contact.box_key,
            "invited",
            inviter,
        ),
    )
    return invitation_op(conn, room.room_id, contact.fingerprint)


async def _invite_one(daemon: Daemon, room: Room, who: str) -> str:
    """Add ``who`` on the relay, name them in the room, then send them the invitation in our
    room of two. Inviting someone already invited sends the invitation again."""
    keys = daemon.keys
    contact = await daemon.store.read(lambda c: contact_named(c, who))
    direct = await daemon.store.read(lambda c: direct_room_with(c, contact.fingerprint))
    if direct is None:
        raise NotAMember(f"You share no room with {contact.label}, so you cannot add them.")
    transcript = w.member_transcript(room.room_id, contact.signing_key, contact.box_key)
    add = w.Add(
        0, room.room_id, contact.signing_key, contact.box_key, crypto.sign(keys, transcript)
    )
    relay = await daemon.relay()
    try:
        await relay.request(add, w.Ok)
    except CrosstalkError as exc:
        if exc.code != "already_member":
            raise
        roster = await daemon.store.read(lambda c: members(c, room.room_id))
        if any(m.fingerprint == contact.fingerprint and m.state == "member" for m in roster):
            raise UsageError(f"{contact.label} is already in {room.name}.") from None
    op = await daemon.store.write(lambda c: _invitation(c, room, contact, keys.fingerprint))
    # Members who never paired with them learn their name from us (the roster has none).
    await daemon.send_op(room.room_id, MemberNamed({contact.fingerprint: contact.label}))
    await daemon.send_op(direct.room_id, op)
    # The row written above is our guess; the relay's roster is the truth (they may have
    # declined an earlier invitation just as this one went out: seed 92 of the simulation).
    await fetch_roster(daemon.store, keys, relay, room.room_id)
    return contact.label


async def _kick(daemon: Daemon, room_name: str, peer: str) -> KickReply:
    """Take ``peer`` out of a named room on the relay, then rekey for everyone left."""
    keys = daemon.keys
    room = await daemon.store.read(lambda c: find_room(c, room_name))
    if room.kind == "direct":
        raise DirectRoom(
            f"{room.name} is a room of two: it is your pairing with them, and nobody can be "
            "removed from it."
        )
    views = await daemon.store.read(lambda c: _views(c, keys.fingerprint))
    view = next(v for v in views.rooms if v.id == room.room_id)
    target = next((m for m in view.members if peer in (m.label, m.fingerprint)), None)
    if target is None or target.fingerprint == keys.fingerprint:
        raise UsageError(f"{peer!r} is not someone else in {room.name}.")
    relay = await daemon.relay()
    await relay.request(w.Remove(0, room.room_id, target.fingerprint), w.Ok)
    epoch = await _rekey(daemon, relay, room.room_id, target.fingerprint)
    return KickReply(room.name, target.label, epoch)


async def _rekey(daemon: Daemon, relay: RelayClient, room_id: str, removed: str) -> int:
    """Mint the room's next epoch key and send it to everyone left; returns the epoch."""
    keys = daemon.keys
    # Seal the next key to the roster as the relay has it now, checked by signature: whoever
    # is in it (joined or invited) must be able to read what comes next, and nobody else.
    await fetch_roster(daemon.store, keys, relay, room_id)
    roster = await daemon.store.read(lambda c: members(c, room_id))
    room = await daemon.store.read(lambda c: get_room(c, room_id))
    remaining = [m for m in roster if m.fingerprint != removed]
    epoch, key = room.epoch + 1, nacl.utils.random(32)
    sealed = {m.fingerprint: seal_key(m.box_key, key, room_id, epoch) for m in remaining}
    # Sealed under the old epoch (everyone remaining can open it); the removed member is
    # already off the relay's roster, so it never receives this op.
    await daemon.send_op(room_id, Rekey(epoch, removed, sealed))
    await daemon.store.write(lambda c: room_keys.rotate_key(c, room_id, epoch, key, removed))
    # Invited members cannot read the rekey op (their cursor starts when they accept).
    await share_with_stranded(daemon.store, daemon.send_op, room_id, keys.fingerprint, sealed)
    return epoch


async def _rekeyed_at_once(daemon: Daemon, entry: Applied, op: Rekey) -> None:
    """Someone else's rekey minted an epoch we had minted too. Both keys stay usable (see
    room_keys.take_rekeyed), but each was sealed to a roster that may still have held the member
    the other one removed: one of the two (the lower fingerprint) rekeys again for everyone
    left, so no removed member holds the key everyone sends under next."""
    me = daemon.keys.fingerprint
    clash = await daemon.store.read(
        functools.partial(minted_clash, applied=entry, keys=daemon.keys)
    )
    if not clash or me > entry.sender:
        return
    log.info("room %s: %s and we both rekeyed epoch %d; rekeying again", entry.room_id,
             entry.sender[:9], op.epoch)
    try:
        await _rekey(daemon, await daemon.relay(), entry.room_id, op.removed)
    except CrosstalkError as exc:
        log.warning("room %s: rekeying again failed: %s", entry.room_id, exc.message)


async def _invited_back(daemon: Daemon, relay: RelayClient, room_id: str) -> bool:
    """Removed from ``room_id``, and the relay has us invited again (the invitation may have
    been applied here before the removal was heard): the room is pending once more."""
    if room_id not in await daemon.store.read(mq.removed_rooms):
        return False
    if await relay_room_state(relay, room_id) != "invited":
        return False
    await daemon.store.write(lambda c: mq.invited_again(c, room_id))
    return True


def _key_listener(daemon: Daemon) -> Callable[[list[Applied]], Awaitable[None]]:
    """After a commit: wake a room whose key came by invitation; pass a rekey on to the members
    we added who cannot read it."""

    async def listener(applied: list[Applied]) -> None:
        for entry in applied:
            if isinstance(entry.op, RoomInvite):
                await daemon.wake_room(entry.op.room_id)
            elif isinstance(entry.op, MemberNamed):
                names = await daemon.store.read(
                    functools.partial(welcome, applied=entry, me=daemon.keys.fingerprint)
                )
                if names is not None:
                    await daemon.send_op(entry.room_id, names)
            elif isinstance(entry.op, Rekey):
                await share_with_stranded(
                    daemon.store, daemon.send_op, entry.room_id, daemon.keys.fingerprint,
                    entry.op.sealed,
                )
                await _rekeyed_at_once(daemon, entry, entry.op)

    return listener


def plug(daemon: Daemon) -> Plugs:
    def adopt(conn: sqlite3.Connection, applied: Applied) -> None:
        adopt_invitation(conn, applied, daemon.keys)

    def rekey(conn: sqlite3.Connection, applied: Applied) -> None:
        apply_rekey(conn, applied, daemon.keys)

    async def rooms(_: NoParams) -> RoomsReply:
        me = daemon.keys.fingerprint if daemon.identity is not None else ""
        return await daemon.store.read(lambda c: _views(c, me))

    async def create(params: CreateParams) -> RoomReply:
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
            add_member(
                conn,
                RoomMember(
                    room_id,
                    keys.fingerprint,
                    me.label,
                    keys.ed_pub,
                    keys.x_pub,
                    "member",
                    keys.fingerprint,
                ),
            )

        # Here first, then at the relay: an answer lost on the way back leaves a room that the
        # next link-up creates at the relay again, never a relay room with no key anywhere.
        await daemon.store.write(record)
        try:
            await create_on_relay(await daemon.relay(), keys, room_id)
        except CrosstalkError as exc:
            if exc.code != "relay_unreachable":
                await daemon.store.write(lambda c: room_keys.forget_room(c, room_id))
            raise
        await daemon.room_inbox(room_id)
        return RoomReply(name, room_id, "joined")

    async def invite(params: InviteParams) -> InviteReply:
        room = await daemon.store.read(lambda c: find_room(c, params.room))
        if room.state != "joined":
            raise NotAMember(f"You have not joined {room.name}; accept it first.")
        invited = [await _invite_one(daemon, room, who) for who in params.peers]
        return InviteReply(room.name, invited)

    async def accept(params: RoomParams) -> RoomReply:
        room = await daemon.store.read(lambda c: find_room(c, params.room))
        relay = await daemon.relay()
        if room.state != "invited" and not await _invited_back(daemon, relay, room.room_id):
            raise NotInvited(f"There is no pending invitation to {room.name}.")
        try:
            await relay.request(w.Accept(0, room.room_id), w.Ok)
        except CrosstalkError as exc:
            # An earlier accept whose answer was lost: the relay has us joined already.
            if exc.code != "not_invited" or not await relay_says_joined(relay, room.room_id):
                raise
        await finish_join(daemon, room.room_id)
        return RoomReply(room.name, room.room_id, "joined")

    async def decline(params: RoomParams) -> RoomReply:
        room = await daemon.store.read(lambda c: find_room(c, params.room))
        if room.state != "invited":
            raise NotInvited(f"There is no pending invitation to {room.name}.")
        await (await daemon.relay()).request(w.Decline(0, room.room_id), w.Ok)
        await daemon.store.write(lambda c: room_keys.forget_room(c, room.room_id))
        return RoomReply(room.name, room.room_id, "declined")

    async def leave(params: RoomParams) -> RoomReply:
        room = await daemon.store.read(lambda c: find_room(c, params.room))
        try:
            await (await daemon.relay()).request(w.Leave(0, room.room_id), w.Ok)
        except CrosstalkError as exc:
            if exc.code not in {"unknown_room", "not_a_member"}:
                raise
        await daemon.forget_room(room.room_id)
        await daemon.store.write(lambda c: room_keys.forget_room(c, room.room_id))
        return RoomReply(room.name, room.room_id, "left")

    async def kick(params: KickParams) -> KickReply:
        return await _kick(daemon, params.room, params.peer)

    return Plugs(
        ops=(
            op("rooms", NoParams, rooms),
            op("room_create", CreateParams, create),
            op("room_invite", InviteParams, invite),
            op("room_accept", RoomParams, accept),
            op("room_decline", RoomParams, decline),
            op("room_leave", RoomParams, leave),
            op("room_kick", KickParams, kick),
        ),
        appliers=(adopt, rekey, apply_names),
        key_takers=(rekey,),
        applied_listeners=(_key_listener(daemon),),
    )


FEATURE = Feature("rooms", plug)
