"""Migration 27 (a message's words kept once, store/schema_lean.py): a store filled at version 26
finds what it found before, with the same snippets, and the index stays right on every change."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.store import messages, room_keys
from crosstalk.store.migrations import MIGRATIONS, migrate
from crosstalk.store.rooms import Room, add_room
from crosstalk.store.search import Hit
from tests.store.test_search_store import NOW, consistent, fact, find, hold, put_memory


@pytest.fixture
def old(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A store at version 26 with two rooms, ``r2`` about to be left."""
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(connection, MIGRATIONS[:26])
    add_room(connection, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    add_room(connection, Room("r2", "ops", "shared", "joined", 0, NOW), b"k" * 32)
    yield connection
    connection.close()


def send(conn: sqlite3.Connection, msg_id: str, text: str, room: str = "r1") -> None:
    messages.record_sent(conn, msg_id=msg_id, room_id=room, to_label="ben", kind="message",
                         chars=len(text), created_at=NOW, thread=None, reply_to=None, text=text)


def _fill(conn: sqlite3.Connection) -> None:
    hold(conn, "held", "the gizmo ships on friday after the review",
         slices=[{"kind": "file", "label": "gizmo.py", "content": "x"}])
    send(conn, "mine", "my gizmo notes for the review")
    put_memory(conn, "r1", facts=(fact("f1", "gizmo reviews happen weekly"),))
    hold(conn, "ops-held", "gizmo incident in ops", room="r2")
    send(conn, "ops-sent", "gizmo rollback in ops", room="r2")
    room_keys.forget_room(conn, "r2")


def _everything(conn: sqlite3.Connection) -> list[Hit]:
    return sorted(find(conn, "gizmo") + find(conn, "review*"), key=lambda h: (h.id, h.snippet))


def test_migration_27_finds_what_version_26_found_with_the_same_snippets(
    old: sqlite3.Connection,
) -> None:
    """Every hit (held, sent, a fact, a left room's kept rows), snippet and all, is as before;
    a message still here keeps its words once, a left room's kept row its own copy."""
    _fill(old)
    before = _everything(old)
    assert len(before) == 8
    assert migrate(old, MIGRATIONS[:27]) == [27]
    assert _everything(old) == before
    # What we sent stays after a leave (sent_messages is ours): read from there too.
    copies = dict(old.execute("SELECT ref, text FROM search_docs WHERE kind = 'message'"))
    assert copies == {"held": None, "mine": None, "ops-held": "gizmo incident in ops",
                      "ops-sent": None}
    consistent(old)


def test_words_are_read_from_the_message_and_follow_every_change(
    old: sqlite3.Connection,
) -> None:
    """Held and sent after the step: no copy; a rewrite, a re-send and a leave keep the index
    right (FTS5's integrity check), and the left room's rows keep their words."""
    migrate(old, MIGRATIONS[:27])
    _fill(old)
    assert old.execute("SELECT count(*) FROM search_docs WHERE kind = 'message' AND "
                       "text IS NULL").fetchone()[0] == 3
    old.execute("UPDATE held_messages SET body = json_set(body, '$.text', 'widget now') "
                "WHERE message_id = 'held'")
    send(old, "mine", "my widget notes")  # the upsert rewrites the text
    assert sorted(h.id for h in find(old, "widget")) == ["held", "mine"]
    # "held" still by its slice label (gizmo.py), not by its old words.
    assert sorted(h.id for h in find(old, "gizmo")) == ["f1", "held", "ops-held", "ops-sent"]
    assert find(old, "friday") == []
    consistent(old)
    old.execute("DELETE FROM held_messages")
    assert [h.id for h in find(old, "widget")] == ["mine"]
    consistent(old)


def test_the_integrity_check_sees_an_entry_deleted_after_its_words(
    old: sqlite3.Connection,
) -> None:
    """Planted bug: the held message's index row taken away AFTER the message is gone (as step
    25's triggers did, when the row had its own copy) leaves FTS5 unable to delete the right
    words, and the check the tests above rely on says so."""
    migrate(old, MIGRATIONS[:27])
    hold(old, "held", "the gizmo ships on friday")
    old.execute("DROP TRIGGER search_held_bd")
    old.execute("CREATE TRIGGER search_held_ad AFTER DELETE ON held_messages BEGIN "
                "DELETE FROM search_docs WHERE key = 'm:' || OLD.message_id; END")
    old.execute("DELETE FROM held_messages")
    with pytest.raises(sqlite3.DatabaseError):
        consistent(old)
