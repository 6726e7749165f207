"""Room keys for members who cannot read the op that carries them.

A ``Rekey`` op reaches only joined members: someone invited before the rekey (their relay cursor
starts when they accept) never sees it, and someone invited while the remover was rekeying is
not in its sealed set. Either would hold every op of the new epoch for ever. Whoever added such
a member fixes it through the room of two they share: they send the invitation again, with the
current key sealed to the member; the member's daemon takes the key for a room it already has
and wakes the room, so the held ops open.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Collection, Mapping

import nacl.utils

from crosstalk import crypto
from crosstalk.store import room_keys
from crosstalk.store.db import Store
from crosstalk.store.rooms import direct_room_with, get_room, members, room_key
from crosstalk.wire.room_ops import InvitedMember, RoomInvite, RoomOp

SendOp = Callable[[str, RoomOp], Awaitable[str]]


def key_context(room_id: str, epoch: int) -> bytes:
    """What a sealed room key is bound to: the room and the epoch it opens."""
    return b"crosstalk-room-key\x00" + room_id.encode() + b"\x00" + str(epoch).encode()


def take_sealed_key(
    conn: sqlite3.Connection,
    keys: crypto.Keys,
    room_id: str,
    epoch: int,
    sealed_to: Mapping[str, bytes],
) -> bool:
    """Hold the room's ``epoch`` key if ``sealed_to`` has it sealed to us (a rekey, a share);
    anything not sealed to us, or that does not open, is ignored. ``True`` when it differs
    from a key we minted for that epoch ourselves (two of us rekeyed at once)."""
    sealed = sealed_to.get(keys.fingerprint)
    if sealed is None:
        return False
    try:
        key = crypto.open_sealed(keys, sealed, context=key_context(room_id, epoch))
    except crypto.OpenFailed:
        return False
    return room_keys.take_rekeyed(conn, room_id, epoch, key)


def seal_key(member_x: bytes, key: bytes, room_id: str, epoch: int) -> bytes:
    """``key`` (the room's key for ``epoch``) sealed to one member's X25519 key."""
    return crypto.seal_to(
        member_x,
        key,
        ephemeral_secret=nacl.utils.random(32),
        nonce=nacl.utils.random(24),
        context=key_context(room_id, epoch),
    )


def invitation(conn: sqlite3.Connection, room_id: str, fingerprint: str) -> RoomInvite:
    """The invitation for ``fingerprint`` as of now: the current key and the live roster."""
    room = get_room(conn, room_id)
    key = room_key(conn, room_id, room.epoch)
    roster = members(conn, room_id)
    target = next(m for m in roster if m.fingerprint == fingerprint)
    assert key is not None, "a joined room always has its current key"
    sealed = seal_key(target.box_key, key, room_id, room.epoch)
    listed = tuple(InvitedMember(m.fingerprint, m.label, m.signing_key, m.box_key) for m in roster)
    return RoomInvite(room_id, room.name, room.epoch, sealed, listed)


def stranded(
    conn: sqlite3.Connection, room_id: str, me: str, sealed: Collection[str]
) -> list[str]:
    """Members we added who will not read a rekey sealed to ``sealed``: still invited, or left
    out of it."""
    return [
        m.fingerprint
        for m in members(conn, room_id)
        if m.added_by == me and m.fingerprint != me
        and (m.state == "invited" or m.fingerprint not in sealed)
    ]


def _refreshes(
    conn: sqlite3.Connection, room_id: str, fingerprints: Collection[str]
) -> list[tuple[str, RoomInvite]]:
    out = []
    for fp in fingerprints:
        direct = direct_room_with(conn, fp)
        if direct is not None:
            out.append((direct.room_id, invitation(conn, room_id, fp)))
    return out


async def share_with_stranded(
    store: Store, send_op: SendOp, room_id: str, me: str, sealed: Collection[str],
    removed: str,
) -> None:
    """Send the room's current key, through our room of two, to each member we added who will
    not read a rekey sealed to ``sealed``; never to the member that rekey ``removed``, even if
    the roster lists them again: one really invited back is owed the newer keys when it joins
    (:mod:`crosstalk.features.membership.key_share`), and the rekey's own share is no way round
    the removal for a relay that re-lists them."""

    def refreshes(conn: sqlite3.Connection) -> list[tuple[str, RoomInvite]]:
        wanted = [fp for fp in stranded(conn, room_id, me, sealed) if fp != removed]
        return _refreshes(conn, room_id, wanted)

    for direct, op in await store.read(refreshes):
        await send_op(direct, op)
