"""The relay link's durable state in a real state.db (schema v2), one commit per method."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crosstalk.actors.relay_link_store import SqliteLinkStore, device_id
from crosstalk.core.link import OutboxItem
from crosstalk.errors import NotAMember, RelayKeyMismatch, UnknownRoom
from crosstalk.store import link
from crosstalk.store.db import Store, open_store
from crosstalk.store.settings import RELAY_KEYS, get_setting
from crosstalk.wire import relay as w

URL = "ws://relay.test"


async def queue(store: Store, room: str, op_id: str, body: bytes, now: float) -> OutboxItem | None:
    """Commit a post to the outbox, as a room's send does (crosstalk.actors.room_send)."""
    return await store.write(lambda conn: link.queue_post(conn, room, op_id, body, now))


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    async with open_store(tmp_path / "state.db") as opened:
        await opened.write(lambda conn: conn.executemany(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, ?, 'direct', 'joined', 0)", [("r1", "one"), ("r2", "two")]))
        yield opened


async def test_a_fresh_home_loads_no_pin_no_cursors_and_an_empty_outbox(store: Store) -> None:
    """Nothing pinned, resumed or queued yet."""
    snapshot = await SqliteLinkStore(store).load(URL)
    assert (snapshot.pinned_key, snapshot.cursors, snapshot.outbox) == (None, {}, [])


async def test_posts_are_queued_once_in_order_and_reload_until_sent(store: Store) -> None:
    """A post is queued once per op_id; load returns queued rows by id; sent rows stay out."""
    db = SqliteLinkStore(store)
    first = await queue(store, "r1", "op-1", b"one", 1.0)
    second = await queue(store, "r2", "op-2", b"two", 2.0)
    assert first is not None and second is not None and first.id < second.id
    assert await queue(store, "r1", "op-1", b"one", 3.0) == first
    assert (await db.load(URL)).outbox == [first, second]
    await db.mark_sent(first, 7)
    assert (await db.load(URL)).outbox == [second]
    assert await queue(store, "r1", "op-1", b"one", 4.0) is None
    row = await store.read(lambda c: c.execute(
        "SELECT state, seq FROM outbox WHERE op_id = 'op-1'").fetchone())
    assert tuple(row) == ("sent", 7)
    await db.drop_post(second, NotAMember("You are not a member of that room."))
    assert (await db.load(URL)).outbox == []


async def test_a_refused_post_leaves_the_outbox_and_keeps_the_relays_reason(store: Store) -> None:
    """drop_post deletes the outbox row and records the code and sentence in refused_ops."""
    db = SqliteLinkStore(store)
    item = await queue(store, "r1", "op-9", b"nine", 1.0)
    assert item is not None
    await db.drop_post(item, NotAMember("You are not a member of that room."))
    assert (await db.load(URL)).outbox == []
    row = await store.read(lambda c: c.execute(
        "SELECT room_id, code, reason FROM refused_ops WHERE op_id = 'op-9'").fetchone())
    assert tuple(row) == ("r1", "not_a_member", "You are not a member of that room.")


async def test_a_post_to_an_unknown_room_or_a_reused_op_id_is_refused(store: Store) -> None:
    """The outbox refers to rooms; an op_id cannot be reused for other content."""
    with pytest.raises(UnknownRoom):
        await queue(store, "nowhere", "op-x", b"x", 1.0)
    await queue(store, "r1", "op-1", b"one", 1.0)
    with pytest.raises(UnknownRoom, match="other content"):
        await queue(store, "r1", "op-1", b"different", 2.0)


async def test_inbound_ops_commit_once_with_a_cursor_that_only_moves_forward(
    store: Store,
) -> None:
    """A re-delivered op is not new; the cursor keeps the highest seq; rooms need no row."""
    db = SqliteLinkStore(store)
    op = w.Op("elsewhere", 5, "aaaa-bbbb-cccc-dddd", "op-5", b"sealed", 12.5)
    assert await db.commit_inbound(op, 100.0) is True
    assert await db.commit_inbound(op, 101.0) is False
    older = w.Op("elsewhere", 3, "aaaa-bbbb-cccc-dddd", "op-3", b"older", 12.0)
    assert await db.commit_inbound(older, 102.0) is True
    assert (await db.load(URL)).cursors == {"elsewhere": 5}
    rows = await store.read(lambda c: c.execute(
        "SELECT seq, op_id, body FROM relay_inbound ORDER BY seq").fetchall())
    assert [tuple(r) for r in rows] == [(3, "op-3", b"older"), (5, "op-5", b"sealed")]


async def test_rooms_are_tracked_from_zero_and_forgotten(store: Store) -> None:
    """track_room never moves an existing cursor back; forget_room drops it."""
    db = SqliteLinkStore(store)
    await db.track_room("a")
    await db.commit_inbound(w.Op("b", 2, "s", "o", b"", 0.0), 0.0)
    await db.track_room("b")
    assert (await db.load(URL)).cursors == {"a": 0, "b": 2}
    await db.forget_room("a")
    assert (await db.load(URL)).cursors == {"b": 2}


async def test_a_pin_is_kept_per_url_and_never_silently_replaced(store: Store) -> None:
    """Pins load back by URL; pinning another key for a pinned URL raises."""
    db = SqliteLinkStore(store)
    await db.pin_relay_key(URL, b"\x01" * 32)
    await db.pin_relay_key("ws://other", b"\x02" * 32)
    await db.pin_relay_key(URL, b"\x01" * 32)
    assert (await db.load(URL)).pinned_key == b"\x01" * 32
    with pytest.raises(RelayKeyMismatch):
        await db.pin_relay_key(URL, b"\x03" * 32)
    pins = await store.read(lambda c: get_setting(c, RELAY_KEYS))
    assert isinstance(pins, dict) and sorted(pins) == ["ws://other", URL]


async def test_the_device_id_is_made_once_and_kept(store: Store) -> None:
    """device_id returns the same 16 hex digits every time."""
    first = await device_id(store)
    assert len(first) == 16 and int(first, 16) >= 0
    assert await device_id(store) == first



async def test_our_own_post_moves_the_cursor_only_when_it_is_the_next_op(store: Store) -> None:
    """The relay never echoes our post: right after the cursor it moves it; after a gap, not."""
    db = SqliteLinkStore(store)
    await db.track_room("r1")
    first = await queue(store, "r1", "op-1", b"one", 1.0)
    gap = await queue(store, "r1", "op-2", b"two", 2.0)
    assert first is not None and gap is not None
    assert await db.mark_sent(first, 1) is True
    assert await db.mark_sent(gap, 5) is False  # seqs 2-4 are someone else's, not here yet
    assert (await db.load(URL)).cursors == {"r1": 1}
