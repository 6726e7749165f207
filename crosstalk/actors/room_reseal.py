"""Seal a queued post anew when its room moved to a newer key epoch before it left.

The relay link does not post an outbox item sealed under an epoch older than one the room's
inbound ops already show (crosstalk.core.link.outbox); it asks for :func:`resealer`'s answer
instead. We sealed the item ourselves, so we can open it with the key of its own epoch and seal
the same plaintext, op id and all, under the newest epoch we hold, replacing the outbox row in
one transaction. Until the rekey or share that brings the newer key is applied here, the answer
is "not yet" and the link asks again a little later.

Some ops must stay under the epoch they were sealed for, because what they carry is how their
readers get newer keys: a ``Rekey`` (sealed under the epoch the remaining members hold), a
``KeyShare`` (under the joiner's own epoch) and a joiner's ``MemberNamed`` for itself (which
tells the others which epoch it holds). They go as they are. So does an item we can no longer
open or whose room is gone: the relay's answer settles it.
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


def reseal_in(conn: sqlite3.Connection, keys: crypto.Keys, item: OutboxItem) -> Resealed:
    """Inside a write transaction: :func:`resealer`'s answer for ``item``."""
    try:
        epoch, sealed = unframe_body(item.body)
        room = get_room(conn, item.room)
    except CrosstalkError:
        return Resealed(as_is=True)
    if room.epoch <= epoch:
        return Resealed()  # no newer key here yet
    old_key, new_key = room_key(conn, item.room, epoch), room_key(conn, item.room, room.epoch)
    if old_key is None or new_key is None:
        return Resealed(as_is=True)
    try:
        plaintext = crypto.open_op(
            old_key, sealed, sender_ed_pub=keys.ed_pub, room_id=item.room, epoch=epoch,
            op_id=item.op_id,
        )
        op = decode_op(plaintext)
    except CrosstalkError:  # an op we cannot open or read: the relay's answer settles it
        return Resealed(as_is=True)
    if isinstance(op, Rekey | KeyShare) or (
        isinstance(op, MemberNamed) and set(op.names) == {keys.fingerprint}
    ):
        return Resealed(as_is=True)
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
