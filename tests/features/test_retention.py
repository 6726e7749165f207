"""Retention (crosstalk/features/retention/): finished history goes, anything still owed stays."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.store.db import connect
from crosstalk.store.retention import more_to_do, prune

OLD, RECENT, CUTOFF = 1_000.0, 9_000.0, 5_000.0


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(tmp_path / "state.db")
    connection.execute(
        "INSERT INTO rooms (room_id, name, kind, state, created_at) "
        "VALUES ('r', 'ana', 'direct', 'joined', 0)"
    )
    connection.execute("INSERT INTO room_cursors (room_id, seq) VALUES ('r', 10)")
    connection.execute("INSERT INTO memory_rooms (room_id, last_seq) VALUES ('r', 10)")
    yield connection
    connection.close()


def _held(conn: sqlite3.Connection, msg: str, received: float, read: float | None) -> None:
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, intent, body, received_at, "
        "read_at) VALUES (?, 'r', 'fp', 'fyi', '{}', ?, ?)",
        (msg, received, read),
    )
    conn.execute(
        "INSERT INTO notices (message_id, label, decision, due, created_at) "
        "VALUES (?, 'ana', 'notify', 'now', ?)",
        (msg, received),
    )
    conn.execute(
        "INSERT INTO attention_record (item, source, ts, decision) VALUES (?, 'ana', ?, 'notify')",
        (msg, received),
    )


def _ids(conn: sqlite3.Connection, sql: str) -> set[str]:
    return {str(row[0]) for row in conn.execute(sql)}


def test_old_read_messages_and_their_notices_go(conn: sqlite3.Connection) -> None:
    _held(conn, "old-read", OLD, OLD + 1)
    _held(conn, "old-unread", OLD, None)
    _held(conn, "recent-read", RECENT, RECENT + 1)
    removed = prune(conn, CUTOFF)
    assert _ids(conn, "SELECT message_id FROM held_messages") == {"old-unread", "recent-read"}
    # The unread message's notice stays (it may still surface); its record entry is history.
    assert _ids(conn, "SELECT message_id FROM notices") == {"old-unread", "recent-read"}
    assert _ids(conn, "SELECT item FROM attention_record") == {"recent-read"}
    assert removed["held_messages"] == 1 and removed["notices"] == 1
    assert removed["attention_record"] == 2


def test_inbound_and_outbox_go_only_once_applied_and_passed(conn: sqlite3.Connection) -> None:
    """Old link copies go once applied and passed by memory; a memory op still to report stays."""
    for op, seq in (("applied", 5), ("ahead", 11)):
        conn.execute(
            "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, "
            "received_at) VALUES ('r', ?, ?, 'fp', x'00', ?, ?)",
            (op, seq, OLD, OLD),
        )
    posts = (("delivered", 3, "sent"), ("undelivered", 4, "sent"), ("queued", None, "queued"),
             ("reporting", 6, "sent"), ("unpassed", 12, "sent"))
    for op, seq, state in posts:
        conn.execute(
            "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
            "VALUES (?, 'r', x'00', ?, ?, ?)",
            (op, state, seq, OLD),
        )
    for msg, receipt, seq in (("delivered", "delivered", 3), ("undelivered", None, 4)):
        conn.execute(
            "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, receipt, created_at, "
            "seq) VALUES (?, 'r', 'ana', 'message', ?, ?, ?)",
            (msg, receipt, OLD, seq),
        )
    conn.execute(
        "INSERT INTO memory_sent (op_id, room_id, kind, body, created_at) "
        "VALUES ('reporting', 'r', 'AddFact', '{}', ?)", (OLD,)
    )
    prune(conn, CUTOFF)
    assert _ids(conn, "SELECT op_id FROM relay_inbound") == {"ahead"}
    # A message's `sent` is on its sent_messages row (its seq): the outbox row is not needed.
    assert _ids(conn, "SELECT op_id FROM outbox") == {"reporting", "queued", "unpassed"}
    assert _ids(conn, "SELECT msg_id FROM sent_messages") == {"delivered", "undelivered"}


def test_stale_sessions_go(conn: sqlite3.Connection) -> None:
    for name, seen in (("gone", OLD), ("here", RECENT)):
        conn.execute(
            "INSERT INTO sessions (name, client, registered_at, last_seen) "
            "VALUES (?, 'claude', ?, ?)",
            (name, seen, seen),
        )
    prune(conn, CUTOFF)
    assert _ids(conn, "SELECT name FROM sessions") == {"here"}


def test_a_large_prune_goes_in_bounded_steps(conn: sqlite3.Connection) -> None:
    for n in range(25):
        conn.execute(
            "INSERT INTO attention_record (item, source, ts, decision) "
            "VALUES (?, 'ana', ?, 'notify')",
            (f"m{n}", OLD),
        )
    steps = 0
    while True:
        steps += 1
        removed = prune(conn, CUTOFF, limit=10)
        assert removed["attention_record"] <= 10
        if not more_to_do(removed, limit=10):
            break
    assert steps == 3
    assert conn.execute("SELECT count(*) FROM attention_record").fetchone()[0] == 0
