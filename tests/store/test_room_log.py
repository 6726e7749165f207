"""A room's inbound log: what the room actor reads for its next batch, and its roster's keys."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.store import room_log
from crosstalk.store.db import connect
from crosstalk.store.room_keys import mark_gone
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room, signing_keys

ROOM = "r" * 32
OTHER = "o" * 32


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    opened = connect(tmp_path / "state.db")
    for room in (ROOM, OTHER):
        add_room(opened, Room(room, room[:4], "shared", "joined", 0, 0.0), bytes(32))
    rows = [(room, f"{room[0]}{n}", n, "ben", b"x", 0.0) for room in (ROOM, OTHER)
            for n in range(1, 8)]
    opened.executemany(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 0)", rows,
    )
    yield opened
    opened.close()


def test_pending_is_what_follows_the_applied_cursor(conn: sqlite3.Connection) -> None:
    """Before any apply, from seq 1; after the cursor moves, from the seq after it; bounded."""
    assert [op.seq for op in room_log.pending(conn, ROOM, 3)] == [1, 2, 3]
    room_log.advance_applied(conn, ROOM, 5)
    for limit in (1, 2, 10):
        expected = room_log.inbound_after(conn, ROOM, room_log.applied_cursor(conn, ROOM), limit)
        assert room_log.pending(conn, ROOM, limit) == expected
    assert [op.seq for op in room_log.pending(conn, ROOM, 10)] == [6, 7]
    assert [op.seq for op in room_log.pending(conn, OTHER, 10)] == list(range(1, 8))


def test_signing_keys_include_gone_members_of_that_room_only(conn: sqlite3.Connection) -> None:
    """A member who left still verifies what they signed; another room's roster is not read."""
    add_member(conn, RoomMember(ROOM, "ana", "ana", b"A" * 32, b"a" * 32))
    add_member(conn, RoomMember(ROOM, "ben", "ben", b"B" * 32, b"b" * 32))
    add_member(conn, RoomMember(OTHER, "cy", "cy", b"C" * 32, b"c" * 32))
    mark_gone(conn, ROOM, "ben")
    assert signing_keys(conn, ROOM) == {"ana": b"A" * 32, "ben": b"B" * 32}
