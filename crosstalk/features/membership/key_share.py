"""Newer room keys for a joiner who accepted with an older one.

An invitation carries the room's key as of when it was sent. If someone is removed before the
invitee accepts, the ``Rekey`` op that carries the next key is posted before the invitee's relay
cursor starts (it starts at accept), so the invitee never sees it, and every op sealed under the
new epoch would wait at the invitee for ever. The invitee's first op in the room (``MemberNamed``
for itself) shows the epoch it holds. Every member who holds newer keys answers with a
``KeyShare`` per newer epoch, sealed to the joiner's X25519 key and sealed as a room op under the
joiner's own epoch, so the joiner can open it. Answers from several members are harmless: a key
already held is kept as it is.
"""

from __future__ import annotations

import sqlite3

from crosstalk import crypto
from crosstalk.core.room import Applied
from crosstalk.features.membership.keys import seal_key, take_sealed_key
from crosstalk.store import room_keys
from crosstalk.store.rooms import get_room, members
from crosstalk.wire.room_ops import KeyShare, MemberNamed


def shares_owed(conn: sqlite3.Connection, applied: Applied, me: str) -> list[KeyShare]:
    """The keys to share with a joiner who just named itself under an older epoch."""
    op = applied.op
    if not isinstance(op, MemberNamed) or set(op.names) != {applied.sender}:
        return []
    if applied.sender == me or applied.epoch >= get_room(conn, applied.room_id).epoch:
        return []
    joiner = next(
        (m for m in members(conn, applied.room_id) if m.fingerprint == applied.sender), None
    )
    if joiner is None:
        return []
    return [
        KeyShare(epoch, {joiner.fingerprint: seal_key(joiner.box_key, key, applied.room_id, epoch)})
        for epoch, key in room_keys.epoch_keys(conn, applied.room_id)
        if epoch > applied.epoch
    ]


def apply_key_share(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> None:
    """Applier: take a key shared with us (the batch then looks again at what it held)."""
    op = applied.op
    if isinstance(op, KeyShare):
        take_sealed_key(conn, keys, applied.room_id, op.epoch, op.sealed)
