"""Removing someone from a named room, and the new key epoch everyone left moves to.

The remover asks the relay to remove, fetches the roster the relay now has and posts a
``Rekey`` (under the old epoch) with the next key sealed to each remaining member. Two removals
at once: see :mod:`crosstalk.features.membership.rekey`; a remover who joined after a removal it
has no key from yet: :mod:`crosstalk.features.membership.behind`."""

from __future__ import annotations

import functools
import logging

import nacl.utils

from crosstalk import sim_hooks
from crosstalk.actors.relay_client import RelayClient
from crosstalk.core.room import Applied
from crosstalk.errors import (
    CrosstalkError,
    DirectRoom,
    UsageError,
)
from crosstalk.features.caps import Capabilities as Daemon
from crosstalk.features.membership.actor import fetch_roster
from crosstalk.features.membership.behind import epochs_behind, wait_for_newer_key
from crosstalk.features.membership.history import request_change, with_statement
from crosstalk.features.membership.keys import (
    seal_key,
    share_with_stranded,
)
from crosstalk.features.membership.rekey import minted_clash
from crosstalk.features.rooms.views import find_room, room_views
from crosstalk.store import room_keys
from crosstalk.store.rooms import (
    get_room,
    members,
)
from crosstalk.wire import relay as w
from crosstalk.wire.control.replies.rooms import KickReply
from crosstalk.wire.room_ops import Rekey

log = logging.getLogger(__name__)


async def remove_member(daemon: Daemon, room_name: str, peer: str) -> KickReply:
    """Take ``peer`` out of a named room on the relay, then rekey for everyone left."""
    keys = daemon.keys
    room = await daemon.store.read(lambda c: find_room(c, room_name))
    if room.kind == "direct":
        raise DirectRoom(
            f"{room.name} is a room of two: it is your pairing with them, and nobody can be "
            "removed from it."
        )
    views = await daemon.store.read(lambda c: room_views(c, keys.fingerprint))
    view = next(v for v in views.rooms if v.id == room.room_id)
    target = next((m for m in view.members if peer in (m.label, m.fingerprint)), None)
    if target is None or target.fingerprint == keys.fingerprint:
        raise UsageError(f"{peer!r} is not someone else in {room.name}.")
    relay = await daemon.relay()
    # Before the removal: the member we remove may be the one holding the key we lack. The
    # history as held here (pushed since we joined) says whether we may lack one.
    await wait_for_newer_key(daemon.store, room.room_id, keys.fingerprint)
    await request_change(daemon, room.room_id, "remove", target.fingerprint,
                         with_statement(w.Remove(0, room.room_id, target.fingerprint)),
                         relay=relay)
    epoch = await _rekey(daemon, relay, room.room_id, target.fingerprint)
    return KickReply(room.name, target.label, epoch)


async def _rekey(daemon: Daemon, relay: RelayClient, room_id: str, removed: str) -> int:
    """Mint the room's next epoch key and send it to everyone left; returns the epoch."""
    keys = daemon.keys
    # Seal the next key to the roster as the relay has it now, checked by signature: whoever
    # is in it (joined or invited) must be able to read what comes next, and nobody else.
    await fetch_roster(daemon.store, relay, daemon.membership, room_id)
    roster = await daemon.store.read(lambda c: members(c, room_id))
    room = await daemon.store.read(lambda c: get_room(c, room_id))
    remaining = [m for m in roster if m.fingerprint != removed]
    behind = await daemon.store.read(
        functools.partial(epochs_behind, room_id=room_id, me=keys.fingerprint))
    if behind:
        sim_hooks.probe("kick.minted_past_unseen_epochs")
    epoch, key = room.epoch + 1 + behind, nacl.utils.random(32)
    sealed = {m.fingerprint: seal_key(m.box_key, key, room_id, epoch) for m in remaining}
    # Sealed under the old epoch (everyone remaining can open it); the removed member is
    # already off the relay's roster, so it never receives this op. The room moves to the new
    # epoch in the same commit: in a commit of its own, a joiner who named itself under the old
    # epoch in between was owed no share (its MemberNamed applied while we were still at the
    # old one), and never got the key if it joined after the rekey was sequenced (sim seed 127).
    rotate = functools.partial(room_keys.rotate_key, room_id=room_id, epoch=epoch, key=key)
    await daemon.send_op(room_id, Rekey(epoch, removed, sealed), also=rotate)
    # Invited members cannot read the rekey op (their cursor starts when they accept).
    await share_with_stranded(daemon.store, daemon.send_op, room_id, keys.fingerprint, sealed,
                              removed)
    return epoch


async def rekeyed_at_once(daemon: Daemon, entry: Applied, op: Rekey) -> None:
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
