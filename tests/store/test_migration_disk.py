"""Migration 26 (less disk per message) keeps every row a store at version 25 had, and every sent
message's delivery state: the relay's seq moves onto its ``sent_messages`` row."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.store import messages, retention
from crosstalk.store.migrations import MIGRATIONS, migrate, schema_version

ROOM = "r" * 32
TABLES = ("outbox", "sent_messages", "held_messages", "notices", "relay_inbound", "search_docs",
          "ui_sent_words")


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(connection, MIGRATIONS[:25])
    yield connection
    connection.close()


def _fill_at_25(conn: sqlite3.Connection) -> None:
    """A version-25 store's rows: posts in each state, their messages, a held one, its notice."""
    conn.execute(
        "INSERT INTO rooms (room_id, name, kind, state, created_at) "
        "VALUES (?, 'team', 'shared', 'joined', 0)", (ROOM,)
    )
    for op_id, state, seq in (("sent", "sent", 4), ("queued", "queued", None),
                              ("read", "sent", 5)):
        conn.execute(
            "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
            "VALUES (?, ?, x'00', ?, ?, 1)", (op_id, ROOM, state, seq)
        )
        conn.execute(
            "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, receipt, created_at, "
            "text) VALUES (?, ?, 'ben', 'message', ?, 1, ?)",
            (op_id, ROOM, "read" if op_id == "read" else None, f"words of {op_id}"),
        )
        conn.execute(
            "INSERT INTO ui_sent_words (msg_id, room_id, body, created_at) VALUES (?, ?, ?, 1)",
            (op_id, ROOM, '{"text": "words"}'),
        )
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, intent, body, received_at) "
        "VALUES ('held', ?, 'fp', 'fyi', '{\"text\": \"hello there\"}', 2)", (ROOM,)
    )
    conn.execute(
        "INSERT INTO notices (message_id, sender, label, intent, kind, decision, due, "
        "created_at) VALUES ('held', 'fp', 'ana', 'fyi', 'message', 'notify', 'now', 2)"
    )
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, 'held', 3, 'fp', x'00', 2, 2)", (ROOM,)
    )


def _counts(conn: sqlite3.Connection) -> dict[str, int]:
    return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}


def _indexes(conn: sqlite3.Connection) -> set[str]:
    return {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}


def test_migration_26_keeps_every_row_and_every_delivery_state(
    conn: sqlite3.Connection,
) -> None:
    """Rows and states are as before; the seq of each sequenced message is on its row."""
    _fill_at_25(conn)
    before = _counts(conn)
    assert migrate(conn, MIGRATIONS[:26]) == [26]
    assert schema_version(conn) == 26
    assert _counts(conn) == before
    # What version 25 read from the outbox row and the receipt, read after the step.
    states = {"sent": ("sent", None), "queued": ("queued", None), "read": ("read", None)}
    assert {m: messages.delivery_state(conn, m) for m in states} == states
    seqs = dict(conn.execute("SELECT msg_id, seq FROM sent_messages").fetchall())
    assert seqs == {"sent": 4, "queued": None, "read": 5}
    # Once the outbox row is gone, the message still reads sent.
    conn.execute("DELETE FROM outbox WHERE op_id = 'sent'")
    assert messages.delivery_state(conn, "sent") == ("sent", None)
    search = conn.execute("SELECT text FROM search_docs WHERE key = 'm:held'").fetchone()
    assert search == ("hello there",)


def test_migration_26_drops_only_the_indexes_no_query_needs(conn: sqlite3.Connection) -> None:
    """The link tables' by-time indexes, notices_waiting and the search rows by room go (a
    partial index of a left room's search rows comes); every other index stays."""
    before = _indexes(conn)
    migrate(conn, MIGRATIONS[:26])
    gone = {"outbox_by_time", "relay_inbound_by_time", "notices_waiting", "search_docs_by_room"}
    assert before - _indexes(conn) == gone
    assert _indexes(conn) - before == {"search_docs_gone"}


def test_migration_26_marks_a_left_rooms_kept_search_rows_for_retention(
    conn: sqlite3.Connection,
) -> None:
    """The search rows a leave kept (version 25) are marked gone, so they still age out; a
    joined room's are not, and marking a row leaves the full-text index as it was."""
    _fill_at_25(conn)
    conn.execute(
        "INSERT INTO rooms (room_id, name, kind, state, created_at) "
        "VALUES ('left', 'old', 'shared', 'joined', 0)"
    )
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, intent, body, received_at) "
        "VALUES ('bye', 'left', 'fp', 'fyi', '{\"text\": \"farewell party\"}', 2)"
    )
    conn.execute("UPDATE rooms SET state = 'left' WHERE room_id = 'left'")
    conn.execute("DELETE FROM held_messages WHERE room_id = 'left'")  # as forget_room does
    migrate(conn, MIGRATIONS[:26])
    gone = dict(conn.execute("SELECT key, gone FROM search_docs WHERE kind = 'message'"))
    assert gone["m:bye"] == 1 and gone["m:held"] == 0
    found = conn.execute("SELECT rowid FROM search_fts WHERE search_fts MATCH 'farewell'")
    assert len(found.fetchall()) == 1
    assert retention.prune(conn, 1_000.0)["search_docs"] == 1
    assert conn.execute("SELECT count(*) FROM search_docs WHERE key = 'm:bye'").fetchone()[0] == 0
    assert conn.execute(
        "SELECT count(*) FROM search_fts WHERE search_fts MATCH 'farewell'"
    ).fetchone()[0] == 0
