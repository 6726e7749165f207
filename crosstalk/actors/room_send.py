"""The room actor's outbound side: seal an op under the room's key and queue it in the outbox.

An op is sealed under the room's current epoch, or the epoch its sender names (a key share goes
out under the joiner's own epoch, the only key it is sure to hold), signed with our key, and
handed to the relay link, which commits it to the outbox (with the sender's ``also`` writes in
that transaction) before it answers. The sender hears the op id once it is durable, or the
error that stopped it: a removal, a missing key, the link's refusal.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

import attrs
import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.actors.room_reseal import carries_keys
from crosstalk.errors import CrosstalkError, NotAMember, UnknownRoom
from crosstalk.store.db import Store
from crosstalk.store.membership import removal
from crosstalk.store.rooms import get_room, room_key
from crosstalk.wire.room_ops import RoomOp, encode_op, frame_body

log = logging.getLogger(__name__)

NONCE_SIZE = 24


@attrs.frozen(eq=False)
class SendOp:
    """Seal ``op`` and queue it; ``reply`` hears the op id or an error (buffer >= 1)."""

    op_id: str
    op: RoomOp
    reply: trio.MemorySendChannel[str | CrosstalkError]
    epoch: int | None = None  # seal under this epoch's key, not the current one
    also: OutboxWrite | None = None  # written in the transaction that queues it


@attrs.frozen
class Sender:
    """What sealing and queueing for one room needs."""

    room_id: str
    store: Store
    keys: crypto.Keys
    relay: RelayClient
    randomness: Callable[[int], bytes]

    async def send(self, item: SendOp) -> None:
        """Seal ``item``, queue it in the outbox and answer its sender."""
        try:
            if item.epoch is None:
                epoch, key = await self.store.read(self._current_key)
            else:
                wanted = item.epoch
                epoch, key = wanted, await self.store.read(lambda conn: self._key_of(conn, wanted))
            sealed = crypto.seal_op(
                self.keys, key, encode_op(item.op), room_id=self.room_id, epoch=epoch,
                op_id=item.op_id, nonce=self.randomness(NONCE_SIZE),
            )
            await self.relay.post(
                self.room_id, item.op_id, frame_body(epoch, sealed), also=item.also,
                pinned=item.epoch is not None or carries_keys(item.op, self.keys.fingerprint),
            )
        except CrosstalkError as exc:
            _answer(item.reply, exc)
            return
        _answer(item.reply, item.op_id)

    def _current_key(self, conn: sqlite3.Connection) -> tuple[int, bytes]:
        room = get_room(conn, self.room_id)
        removed = removal(conn, self.room_id)
        if removed is not None:
            name, by = removed
            raise NotAMember(f"You were removed from #{name}" + (f" by {by}." if by else "."))
        key = room_key(conn, self.room_id, room.epoch)
        if key is None:
            raise UnknownRoom(f"There is no key for room {room.name!r} here.")
        return room.epoch, key

    def _key_of(self, conn: sqlite3.Connection, epoch: int) -> bytes:
        key = room_key(conn, self.room_id, epoch)
        if key is None:
            raise UnknownRoom(f"There is no key for epoch {epoch} of this room here.")
        return key


def _answer(
    reply: trio.MemorySendChannel[str | CrosstalkError], value: str | CrosstalkError
) -> None:
    try:
        reply.send_nowait(value)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        log.info("a sender stopped waiting for its answer")
