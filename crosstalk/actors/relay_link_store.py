"""What the relay link keeps in ``state.db``, behind one small protocol.

:class:`LinkStore` is the seam: :class:`SqliteLinkStore` is the real one (each method is one
``Store.write``/``read`` transaction of :mod:`crosstalk.store.link`'s SQL, so it returns only after
the commit), and the actor tests use an in-memory fake: real SQLite does real I/O, which trio's
autojump clock does not wait for when it runs in a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from crosstalk.core.link import OutboxItem
from crosstalk.errors import CrosstalkError
from crosstalk.store import link
from crosstalk.store.db import Store
from crosstalk.store.link import LinkSnapshot
from crosstalk.wire import relay as w


class LinkStore(Protocol):
    """Durable state of the relay link. Every method returns after its commit. (Posts are
    committed to the outbox by the room that seals them: crosstalk.actors.room_send.)"""

    async def load(self, url: str) -> LinkSnapshot: ...

    async def commit_inbound(self, op: w.Op, received_at: float) -> bool:
        """Commit an inbound op and advance its room's cursor; ``True`` if it is new here."""

    async def commit_inbound_many(self, ops: Sequence[w.Op], received_at: float) -> None:
        """Commit several inbound ops (in order) and advance their rooms' cursors, at once."""

    async def mark_sent(self, item: OutboxItem, seq: int, ts: float = 0.0) -> bool:
        """Record the relay's seq and time for our post; ``True`` if it also moved the room's
        cursor."""

    async def drop_post(self, item: OutboxItem, error: CrosstalkError) -> None:
        """The relay will never take ``item``: it leaves the outbox, and ``error`` is kept."""
        ...

    async def track_room(self, room: str) -> None: ...

    async def forget_room(self, room: str) -> None: ...

    async def pin_relay_key(self, url: str, key: bytes) -> None: ...


class SqliteLinkStore:
    """:class:`LinkStore` over the daemon's :class:`Store`.

    It only records what arrives (the ops and their rooms' cursors, one commit, before the link
    acknowledges); applying them is the room actor's alone, from the store, once the router
    rings its doorbell (crosstalk.actors.room, "One way in")."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def load(self, url: str) -> LinkSnapshot:
        return await self._store.read(lambda conn: link.load(conn, url))

    async def commit_inbound(self, op: w.Op, received_at: float) -> bool:
        return await self._store.write(lambda conn: link.commit_inbound(conn, op, received_at))

    async def commit_inbound_many(self, ops: Sequence[w.Op], received_at: float) -> None:
        await self._store.write(lambda conn: link.commit_inbound_many(conn, ops, received_at))

    async def mark_sent(self, item: OutboxItem, seq: int, ts: float = 0.0) -> bool:
        return await self._store.write(lambda conn: link.mark_sent(conn, item, seq, ts))

    async def drop_post(self, item: OutboxItem, error: CrosstalkError) -> None:
        await self._store.write(lambda conn: link.drop_post(conn, item, error, time.time()))

    async def track_room(self, room: str) -> None:
        await self._store.write(lambda conn: link.track_room(conn, room))

    async def forget_room(self, room: str) -> None:
        await self._store.write(lambda conn: link.forget_room(conn, room))

    async def pin_relay_key(self, url: str, key: bytes) -> None:
        await self._store.write(lambda conn: link.pin_relay_key(conn, url, key))


async def device_id(store: Store) -> str:
    """This home's device id, made (16 hex digits) and committed on first call."""
    return await store.write(link.get_or_make_device_id)
