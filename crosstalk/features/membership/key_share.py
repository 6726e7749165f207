"""Newer room keys for a joiner who accepted with an older one.

An invitation carries the room's key as of when it was sent. If someone is removed before the
invitee accepts, the ``Rekey`` op that carries the next key is posted before the invitee's relay
cursor starts (it starts at accept), so the invitee never sees it, and every op sealed under the
new epoch would wait at the invitee for ever. The invitee's first op in the room (``MemberNamed``
for itself) shows the epoch it holds. Every member who holds newer keys answers with a
``KeyShare`` per newer epoch, sealed to the joiner's X25519 key and sealed as a room op under the
joiner's own epoch, so the joiner can open it. Answers from several members are harmless: a key
already held is kept as it is. What is owed is written in the transaction that applies the
``MemberNamed`` and cleared with the last share's outbox commit, so a crash between the two is
finished at the next link-up (the simulation's seed 297: the only member holding the new key
crashed right after that commit, and the joiners held every later op for ever).
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections.abc import Awaitable, Collection
from typing import Protocol

from crosstalk import crypto
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError
from crosstalk.features.membership.keys import seal_key, take_sealed_key
from crosstalk.store import membership as mq
from crosstalk.store import room_keys
from crosstalk.store.db import Store
from crosstalk.store.rooms import get_room, members
from crosstalk.wire.room_ops import KeyShare, MemberNamed, RoomOp

log = logging.getLogger(__name__)


class SendOpAt(Protocol):
    """The daemon's ``send_op``: seal under ``epoch``'s key, commit with ``also``."""

    def __call__(
        self, room_id: str, op: RoomOp, *, epoch: int | None = ..., also: OutboxWrite | None = ...
    ) -> Awaitable[str]: ...


def owe_shares(conn: sqlite3.Connection, applied: Applied, me: str) -> None:
    """Applier: a joiner who named itself under an older epoch is owed the newer keys. Noted in
    this transaction, sent by :func:`send_owed` after it (and at the next link-up if a crash
    came first), so a commit never leaves the obligation behind."""
    op = applied.op
    if not isinstance(op, MemberNamed) or set(op.names) != {applied.sender}:
        return
    if applied.sender == me or applied.epoch >= get_room(conn, applied.room_id).epoch:
        return
    if any(m.fingerprint == applied.sender for m in members(conn, applied.room_id)):
        mq.owe_key_shares(conn, applied.room_id, applied.sender, applied.epoch)


def shares_for(conn: sqlite3.Connection, room_id: str, joiner: str, epoch: int) -> list[KeyShare]:
    """A ``KeyShare`` per epoch newer than ``epoch``, sealed to the joiner (none if it is gone)."""
    member = next((m for m in members(conn, room_id) if m.fingerprint == joiner), None)
    if member is None:
        return []
    return [
        KeyShare(e, {joiner: seal_key(member.box_key, key, room_id, e)})
        for e, key in room_keys.epoch_keys(conn, room_id)
        if e > epoch
    ]


async def send_owed(store: Store, send_op: SendOpAt, rooms: Collection[str] | None = None) -> None:
    """Send the key shares owed (in ``rooms``, or all), each under the joiner's own epoch (the
    only key it is sure to hold); the last share of each joiner clears its debt in its commit."""
    for room_id, joiner, epoch in await store.read(mq.key_shares_owed):
        if rooms is not None and room_id not in rooms:
            continue
        shares = await store.read(
            functools.partial(shares_for, room_id=room_id, joiner=joiner, epoch=epoch)
        )
        done = functools.partial(mq.key_shares_sent, room_id=room_id, joiner=joiner)
        try:
            for i, share in enumerate(shares):
                last = i == len(shares) - 1
                await send_op(room_id, share, epoch=epoch, also=done if last else None)
        except CrosstalkError as exc:  # we were removed, or the room is gone: nobody to tell
            log.info("room %s: key shares for %s not sent: %s", room_id, joiner, exc.message)
            shares = []
        if not shares:
            await store.write(done)


def apply_key_share(conn: sqlite3.Connection, applied: Applied, keys: crypto.Keys) -> None:
    """Applier: take a key shared with us (the batch then looks again at what it held)."""
    op = applied.op
    if isinstance(op, KeyShare):
        take_sealed_key(conn, keys, applied.room_id, op.epoch, op.sealed)
