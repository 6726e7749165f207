"""The room actor's outbound side: seal ops under the room's key and commit them to the outbox.

An op is sealed under the room's current epoch, or the epoch its sender names (a key share goes
out under the joiner's own epoch, the only key it is sure to hold), signed with our key, and
committed to the outbox with the sender's ``also`` writes in that transaction. The sender hears
the op id once it is durable, or the error that stopped it (a removal, a missing key); only then
is the committed row handed to the relay link, which posts it when its turn comes. So nothing
acknowledged is ever lost: the commit comes before the answer and before the frame leaves.

Group commit: the sends waiting in the room's inbox when it looks are sealed and committed in
one transaction, each in a savepoint of its own, so one send's error fails that send alone; the
link is handed all of their rows at once. One send costs one store call: the key is read inside
the transaction that queues the op (there is no rekey between the two).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Sequence

import attrs
import trio

from crosstalk import crypto, sim_hooks
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.actors.room_reseal import carries_keys
from crosstalk.core.link import OutboxItem
from crosstalk.errors import CrosstalkError, NotAMember, UnknownRoom
from crosstalk.store import link
from crosstalk.store.db import Store, savepoint
from crosstalk.store.membership import removal
from crosstalk.store.rooms import get_room, room_key
from crosstalk.wire.room_ops import RoomOp, encode_op, frame_body

log = logging.getLogger(__name__)

NONCE_SIZE = 24

Answer = str | CrosstalkError


@attrs.frozen(eq=False)
class SendOp:
    """Seal ``op`` and queue it; ``reply`` hears the op id or an error (buffer >= 1)."""

    op_id: str
    op: RoomOp
    reply: trio.MemorySendChannel[Answer]
    epoch: int | None = None  # seal under this epoch's key, not the current one
    also: OutboxWrite | None = None  # written in the transaction that queues it

    def refuse(self, error: CrosstalkError) -> None:
        """Nothing was queued: the room's actor will not serve this (it FAILED)."""
        _answer(self.reply, error)


@attrs.frozen
class Sender:
    """What sealing and queueing for one room needs."""

    room_id: str
    store: Store
    keys: crypto.Keys
    relay: RelayClient
    randomness: Callable[[int], bytes]

    async def send(self, items: Sequence[SendOp]) -> None:
        """Seal and queue ``items`` in one commit, answer each sender, then hand the committed
        rows to the relay link."""
        answers: list[Answer] = []
        now = time.time()
        try:
            queued = await self.store.write(lambda conn: self.queue_in(conn, items, answers, now))
        except CrosstalkError as exc:  # nothing was committed (a full disk)
            answers = [exc] * len(items)
            queued = []
        except BaseException:
            for item in items:  # a bug, or cancelled: nobody waits for an answer that never comes
                _answer(item.reply, CrosstalkError("The room's actor stopped while sending."))
            raise
        for item, value in zip(items, answers, strict=True):
            _answer(item.reply, value)
        if queued:
            await sim_hooks.handoff("handoff.room_outbound")
            await self.relay.committed(queued, trio.current_time())

    def queue_in(
        self, conn: sqlite3.Connection, items: Sequence[SendOp], answers: list[Answer],
        now: float,
    ) -> list[OutboxItem]:
        """Seal each item and put it in the outbox, in ``conn``'s transaction; ``answers``
        gets each item's op id or error, in order. Returns the rows the link must post."""
        answers.clear()  # (a transaction run again starts afresh)
        queued: list[OutboxItem] = []
        keys: dict[int | None, tuple[int, bytes]] = {}
        for item in items:
            try:
                with savepoint(conn, "send"):
                    if item.epoch not in keys:
                        keys[item.epoch] = self._key(conn, item.epoch)
                    row = self._queue_one(conn, item, *keys[item.epoch], now)
            except CrosstalkError as exc:
                answers.append(exc)
                continue
            answers.append(item.op_id)
            if row is not None:  # None: that op id was sent already
                queued.append(row)
        return queued

    def _queue_one(
        self, conn: sqlite3.Connection, item: SendOp, epoch: int, key: bytes, now: float
    ) -> OutboxItem | None:
        sealed = crypto.seal_op(
            self.keys, key, encode_op(item.op), room_id=self.room_id, epoch=epoch,
            op_id=item.op_id, nonce=self.randomness(NONCE_SIZE),
        )
        pinned = item.epoch is not None or carries_keys(item.op, self.keys.fingerprint)
        row = link.queue_post(
            conn, self.room_id, item.op_id, frame_body(epoch, sealed), now, pinned=pinned
        )
        if item.also is not None:
            item.also(conn)  # idempotent by op id, like the outbox row: a retry writes it again
        return row

    def _key(self, conn: sqlite3.Connection, epoch: int | None) -> tuple[int, bytes]:
        """The epoch to seal under and its key: the room's current one, or ``epoch``'s."""
        if epoch is not None:
            key = room_key(conn, self.room_id, epoch)
            if key is None:
                raise UnknownRoom(f"There is no key for epoch {epoch} of this room here.")
            return epoch, key
        room = get_room(conn, self.room_id)
        removed = removal(conn, self.room_id)
        if removed is not None:
            name, by = removed
            raise NotAMember(f"You were removed from #{name}" + (f" by {by}." if by else "."))
        current = room_key(conn, self.room_id, room.epoch)
        if current is None:
            raise UnknownRoom(f"There is no key for room {room.name!r} here.")
        return room.epoch, current


def _answer(reply: trio.MemorySendChannel[Answer], value: Answer) -> None:
    try:
        reply.send_nowait(value)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        log.info("a sender stopped waiting for its answer")
