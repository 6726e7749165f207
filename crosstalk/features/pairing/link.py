"""``link_new`` and ``link_join``: make another of your machines the same identity.

Six words this time. The machine that has the identity (the inviter) seals an identity bundle
into its offer; the fresh machine (which refuses if it already has an identity) connects with a
throwaway key just for the pairing slot, and once the words are confirmed and the bundle opened
it writes the identity, contacts, rooms, keys and relay cursors in one transaction, then
reconnects as the identity. From then on the relay delivers everything sent to the identity to
both machines (each is its own device with its own cursors).
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import AsyncGenerator
from typing import Protocol

import nacl.utils
import trio

from crosstalk import crypto
from crosstalk.core.invite import Invite
from crosstalk.core.words import BYTES_PER_WORD
from crosstalk.errors import AlreadySetUp, RelayKeyMismatch, RemoteProtocolError
from crosstalk.features.caps import Homed, MakesIdentity, MovesRelay, SendsOps, Stored
from crosstalk.features.feature import Plugs, op, stream_op
from crosstalk.features.pairing.ops import Pairer, make_offer, run_pairing
from crosstalk.store import room_keys, room_log
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.store.rooms import (
    Contact,
    Room,
    RoomMember,
    add_member,
    add_room,
    list_contacts,
    list_rooms,
    members,
    upsert_contact,
)
from crosstalk.store.settings import RELAY_URL, set_setting
from crosstalk.wire import relay as w
from crosstalk.wire.control.params import LinkJoinParams, NoParams
from crosstalk.wire.control.replies.rooms import InviteLine, LinkedLine
from crosstalk.wire.control.table import LINK_JOIN, LINK_NEW
from crosstalk.wire.link_bundle import (
    BundleContact,
    BundleMember,
    BundleRoom,
    EpochKey,
    IdentityBundle,
    decode_bundle,
    encode_bundle,
)
from crosstalk.wire.pairing import Offer, Purpose, Role


class Host(Pairer, Stored, Homed, SendsOps, MakesIdentity, MovesRelay, Protocol):
    """What ``link`` uses: a pairing, the store, and the moves that adopt an identity."""


def _collect(conn: sqlite3.Connection) -> tuple[list[BundleContact], list[BundleRoom]]:
    contacts = [
        BundleContact(c.fingerprint, c.label, c.machine, c.signing_key, c.box_key, c.is_agent)
        for c in list_contacts(conn)
    ]
    cursors = room_log.relay_cursors(conn)
    rooms = []
    for room in list_rooms(conn):
        keys = [EpochKey(epoch, key) for epoch, key in room_keys.epoch_keys(conn, room.room_id)]
        roster = [
            BundleMember(m.fingerprint, m.label, m.signing_key, m.box_key, m.state)
            for m in members(conn, room.room_id)
        ]
        rooms.append(
            BundleRoom(
                room.room_id,
                room.name,
                room.kind,
                room.state,
                room.epoch,
                keys,
                roster,
                cursors.get(room.room_id, 0),
            )
        )
    return contacts, rooms


def _adopt_bundle(conn: sqlite3.Connection, bundle: IdentityBundle) -> None:
    now = time.time()
    for c in bundle.contacts:
        upsert_contact(
            conn,
            Contact(
                c.fingerprint,
                c.label,
                c.machine,
                c.signing_key,
                c.box_key,
                c.is_agent,
                added_at=now,
            ),
        )
    for r in bundle.rooms:
        keys = {k.epoch: k.key for k in r.keys}
        add_room(conn, Room(r.room_id, r.name, r.kind, r.state, r.epoch, now), keys[r.epoch])
        for epoch, key in keys.items():
            room_keys.keep_key(conn, r.room_id, epoch, key)
        for m in r.members:
            add_member(
                conn,
                RoomMember(r.room_id, m.fingerprint, m.label, m.signing_key, m.box_key, m.state),
            )
        # Start where the other machine stands: from now on, both get everything.
        room_log.start_at(conn, r.room_id, r.cursor)
    set_setting(conn, RELAY_URL, bundle.relay_url)


async def _identity_bundle(daemon: Host) -> IdentityBundle:
    """Everything the other machine needs to become us: keys, contacts, rooms, the relay."""
    identity, link = daemon.require_identity(), daemon.link_status()
    assert link is not None and link.relay_key is not None  # the slot was just opened there
    contacts, rooms = await daemon.store.read(_collect)
    return IdentityBundle(
        label=identity.label,
        signing_seed=identity.signing_seed,
        box_secret=identity.box_secret,
        relay_url=link.url,
        relay_key=bytes.fromhex(link.relay_key),
        contacts=contacts,
        rooms=rooms,
    )


async def link_new(daemon: Host, _: NoParams) -> AsyncGenerator[InviteLine | LinkedLine, None]:
    """Show six words at once, then hand our identity to the machine that pairs with them."""
    keys = daemon.keys
    relay = await daemon.relay()
    slot = await relay.request_paid(lambda work: w.SlotOpen(0, work), w.Slot)
    deadline = trio.current_time() + slot.expires_in
    invite = Invite.new(slot.slot, nacl.utils.random(6 * BYTES_PER_WORD), purpose=Purpose.LINK)
    bundle = await _identity_bundle(daemon)
    offer = make_offer(daemon, keys, agent=False, room=None, bundle=encode_bundle(bundle))
    yield InviteLine(invite.format(), int(slot.expires_in))
    await run_pairing(
        daemon, role=Role.INVITER, slot=slot.slot, words=invite.words, offer=offer,
        deadline=deadline, purpose=Purpose.LINK,
    )
    yield LinkedLine(True, keys.fingerprint, bundle.label, len(bundle.rooms))


def _opened_bundle(their: Offer, ours: Offer) -> tuple[IdentityBundle, IdentityRecord]:
    """The identity the other machine sent, once its relay key and its keys check out."""
    if their.relay_key != ours.relay_key or their.identity_bundle is None:
        raise RelayKeyMismatch(
            "The other machine's relay key differs from the one this relay showed us; "
            "nothing was adopted."
        )
    bundle = decode_bundle(their.identity_bundle)
    record = IdentityRecord(
        label=bundle.label,
        machine=ours.machine,
        signing_seed=bundle.signing_seed,
        box_secret=bundle.box_secret,
        created_at=time.time(),
    )
    if crypto.Keys(record.signing_seed, record.box_secret).ed_pub != their.ed_pub:
        raise RemoteProtocolError("The identity bundle does not match its sender.")
    return bundle, record


async def link_join(daemon: Host, params: LinkJoinParams) -> LinkedLine:
    """Pair by the six words under a throwaway key, then become the identity sent over."""
    invite = Invite.parse(params.code, purpose=Purpose.LINK)
    if daemon.identity is not None:
        raise AlreadySetUp(
            f"This home already is {daemon.identity.label} ({daemon.keys.fingerprint}); "
            "`link CODE` only works on a home with no identity yet."
        )
    throwaway = crypto.Keys(nacl.utils.random(32), nacl.utils.random(32))
    relay = await daemon.relay(as_keys=throwaway)
    await relay.request(w.ListRooms(0), w.RoomList)  # waits until the link is ready
    offer = make_offer(daemon, throwaway, agent=False, room=None)
    paired = await run_pairing(
        daemon, role=Role.JOINER, slot=invite.slot, words=invite.words, offer=offer,
        deadline=trio.current_time() + 15 * 60, purpose=Purpose.LINK,
    )
    bundle, record = _opened_bundle(paired.offer, offer)
    await daemon.store.write(lambda conn: _adopt_bundle(conn, bundle))
    await trio.to_thread.run_sync(save_identity, daemon.home.identity, record)
    daemon.adopt_identity(record)
    await daemon.restart_link()
    for room in bundle.rooms:
        if room.state == "joined":
            await daemon.room_inbox(room.room_id)
    return LinkedLine(True, daemon.keys.fingerprint, bundle.label, len(bundle.rooms))


def plug(daemon: Host) -> Plugs:
    """The ``link_new`` and ``link_join`` ops."""
    return Plugs(ops=(
        stream_op(LINK_NEW, functools.partial(link_new, daemon)),
        op(LINK_JOIN, functools.partial(link_join, daemon)),
    ))
