"""Seal a queued post anew when its room moved to a newer key epoch before it left.

The relay link does not post an outbox item sealed under an epoch older than one the room's
inbound ops already show (crosstalk.core.link.outbox); it asks for :func:`resealer`'s answer
instead. We sealed the item ourselves, so we can open it with the key of its own epoch and seal
the same plaintext, op id and all, under the newest epoch we hold, replacing the outbox row in
one transaction. Until the rekey or share that brings the newer key is applied here, the answer
is "not yet" and the link asks again a little later.

Some ops must stay under the epoch they were sealed for, because what they carry is how their
readers get newer keys (:func:`carries_keys`): a ``Rekey`` (sealed under the epoch the remaining
members hold), a ``KeyShare`` (under the joiner's own epoch) and a joiner's ``MemberNamed`` for
itself (which tells the others which epoch it holds, so that they share newer keys with it). They
are queued ``pinned`` and the link never holds them back; one queued before the outbox knew
(schema 19) is answered ``as_is`` here. So is an item we can no longer open or whose room is
gone: the relay's answer settles it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Awaitable, Callable

import attrs
import nacl.utils

from crosstalk import crypto
from crosstalk.core.link import OutboxItem, Resealed
from crosstalk.errors import CrosstalkError
from crosstalk.store import link
from crosstalk.store.db import Store
from crosstalk.store.rooms import get_room, room_key
from crosstalk.wire.room_ops import (
    KeyShare,
    MemberNamed,
    Rekey,
    RoomOp,
    decode_op,
    frame_body,
    unframe_body,
)

log = logging.getLogger(__name__)

NONCE_SIZE = 24

Resealer = Callable[[OutboxItem], Awaitable[Resealed]]


def resealer(store: Store, keys: crypto.Keys) -> Resealer:
    """The relay link's ``reseal``: answers one :class:`ResealWanted` in one transaction."""

    async def reseal(item: OutboxItem) -> Resealed:
        return await store.write(lambda conn: reseal_in(conn, keys, item))

    return reseal


def carries_keys(op: RoomOp, me: str) -> bool:
    """Whether ``op`` is how its readers get newer keys, so it must stay under its epoch."""
    return isinstance(op, Rekey | KeyShare) or (
        isinstance(op, MemberNamed) and set(op.names) == {me}
    )


def reseal_in(conn: sqlite3.Connection, keys: crypto.Keys, item: OutboxItem) -> Resealed:
    """Inside a write transaction: :func:`resealer`'s answer for ``item``."""
    try:
        epoch, sealed = unframe_body(item.body)
        room = get_room(conn, item.room)
        old_key = room_key(conn, item.room, epoch)
        if old_key is None:
            return Resealed(as_is=True)
        plaintext = crypto.open_op(
            old_key, sealed, sender_ed_pub=keys.ed_pub, room_id=item.room, epoch=epoch,
            op_id=item.op_id,
        )
        op = decode_op(plaintext)
    except CrosstalkError:  # an op we cannot open or read, a room gone: the relay settles it
        return Resealed(as_is=True)
    if carries_keys(op, keys.fingerprint):
        return Resealed(as_is=True)
    new_key = room_key(conn, item.room, room.epoch) if room.epoch > epoch else None
    if new_key is None:
        return Resealed()  # no newer key here yet
    resealed = crypto.seal_op(
        keys, new_key, plaintext, room_id=item.room, epoch=room.epoch, op_id=item.op_id,
        nonce=nacl.utils.random(NONCE_SIZE),
    )
    body = frame_body(room.epoch, resealed)
    if not link.replace_queued_body(conn, item.id, body):
        return Resealed()  # sent or gone meanwhile: the link's own answer settles it
    log.info("room %s: op %s sealed anew under epoch %d (was %d)",
             item.room, item.op_id, room.epoch, epoch)
    return Resealed(attrs.evolve(item, body=body))
