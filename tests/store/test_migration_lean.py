"""Migration 27 (a message's words kept once, store/schema_lean.py): a store filled at version 26
finds what it found before, with the same snippets, and the index stays right on every change."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crosstalk.core.triage import Decision
from crosstalk.store import attention, messages, peers, room_keys, ui
from crosstalk.store.migrations import MIGRATIONS, migrate
from crosstalk.store.rooms import Room, add_room
from crosstalk.store.search import Hit
from crosstalk.wire.converter import unstructure
from crosstalk.wire.room_ops import Intent, Kind, MessageOp, Slice
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


# --- the page's words of what we sent -------------------------------------------------------------

ME = "a" * 64


def _op(msg_id: str, text: str) -> MessageOp:
    return MessageOp(msg_id, text, Intent.QUESTION, Kind.ASK, from_label="ana", thread="t1",
                     sent_at=NOW, slices=(Slice("file", "a.py", "print(1)", "0" * 64),))


def _page_send(conn: sqlite3.Connection, op: MessageOp) -> None:
    """What a ``send`` writes in its outbox transaction: its sent row, then the page's words."""
    messages.record_sent(conn, msg_id=op.msg_id, room_id="r1", to_label="ben",
                         kind=op.kind.value, chars=len(op.text), created_at=op.sent_at,
                         thread=op.thread, reply_to=op.reply_to, text=op.text)
    ui.record_sent(conn, msg_id=op.msg_id, room_id="r1", body=unstructure(op), now=NOW)


def _shown(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return [(e.id, e.text, e.intent, e.kind, e.thread, e.from_label, len(e.slices), e.state)
            for e in ui.conversation(conn, "r1", ME)]


def test_migration_27_moves_the_pages_sent_words_onto_their_rows(
    old: sqlite3.Connection,
) -> None:
    """The page shows what version 26 kept (the op, its text from the row); the ops of
    messages `sent` lists leave ui_sent_words for their rows, one with no sent row (an
    automatic answer) stays there."""
    op = _op("m1", "can you review a.py")
    messages.record_sent(old, msg_id="m1", room_id="r1", to_label="ben", kind="ask", chars=3,
                         created_at=NOW, thread="t1", reply_to=None, text=op.text)
    # As version 26 kept it: the op without the text its sent row holds.
    v26 = {k: v for k, v in unstructure(op).items() if k != "text"}
    old.execute("INSERT INTO ui_sent_words (msg_id, room_id, body, created_at) "
                "VALUES ('m1', 'r1', ?, ?)", (messages.body_json(v26), NOW))
    old.execute("INSERT INTO ui_sent_words (msg_id, room_id, body, created_at) "
                "VALUES ('auto', 'r1', '{\"text\":\"refused\",\"kind\":\"answer\"}', ?)",
                (NOW + 1,))
    migrate(old, MIGRATIONS[:27])
    assert [row[:7] for row in _shown(old)] == [
        ("m1", "can you review a.py", "question", "ask", "t1", "ana", 1),
        ("auto", "refused", "fyi", "answer", None, "", 0),
    ]
    assert [r[0] for r in old.execute("SELECT msg_id FROM ui_sent_words")] == ["auto"]


def test_a_sent_message_keeps_its_words_once_on_its_row(old: sqlite3.Connection) -> None:
    """After the step: the op goes on its row without the text, kind, thread or time the row
    holds; the page shows it whole, and its mark changes with its delivery state."""
    migrate(old, MIGRATIONS[:27])
    _page_send(old, _op("m1", "can you review a.py"))
    (words,) = old.execute("SELECT words FROM sent_messages WHERE msg_id = 'm1'").fetchone()
    assert "review" not in words and "t1" not in words and "sent_at" not in words
    assert old.execute("SELECT count(*) FROM ui_sent_words").fetchone()[0] == 0
    assert _shown(old) == [("m1", "can you review a.py", "question", "ask", "t1", "ana", 1,
                            "queued")]
    mark = ui.room_marks(old, ["r1"])
    messages.record_receipt(old, "r1", "m1", "read")
    assert ui.room_marks(old, ["r1"]) != mark and _shown(old)[0][-1] == "read"


def test_an_op_its_row_disagrees_with_is_kept_whole(old: sqlite3.Connection) -> None:
    """A row whose text is not the op's (a closing summary's row, say): the page keeps the
    op whole in its own table, so what it shows is the op's."""
    migrate(old, MIGRATIONS[:27])
    op = _op("m1", "the words the page must show")
    messages.record_sent(old, msg_id="m1", room_id="r1", to_label="ben", kind="ask", chars=3,
                         created_at=NOW, thread="t1", reply_to=None, text="other")
    ui.record_sent(old, msg_id="m1", room_id="r1", body=unstructure(op), now=NOW)
    assert old.execute("SELECT words FROM sent_messages").fetchone() == (None,)
    assert _shown(old)[0][1] == "the words the page must show"


# --- notices without the held message's columns ---------------------------------------------------


def test_migration_27_notices_read_what_they_copied_from_the_held_message(
    old: sqlite3.Connection,
) -> None:
    """A version-26 notice reads the same after the step: sender, room, intent, kind, target
    and the session it came from are its held message's; peers still counts shown notices."""
    hold(old, "q1", "are you there?", sender="fp-ben")
    old.execute("UPDATE held_messages SET target_session = 'cc-1', intent = 'question', "
                "body = json_set(body, '$.from_session', 'api') WHERE message_id = 'q1'")
    old.execute(
        "INSERT INTO notices (message_id, session, target, sender, label, from_session, room_id, "
        "intent, kind, decision, due, created_at, shown_at) VALUES ('q1', 'cc-1', 'cc-1', "
        "'fp-ben', 'ben', 'api', 'r1', 'question', 'message', 'notice_now', 'now', 5, 6)"
    )
    migrate(old, MIGRATIONS[:27])
    assert attention.list_notices(old) == [attention.Notice(
        message_id="q1", session="cc-1", target="cc-1", sender="fp-ben", label="ben",
        from_session="api", room_id="r1", intent=Intent.QUESTION, kind="message",
        decision=Decision.NOTICE_NOW, due="now", created_at=5.0, shown_at=6.0,
    )]
    assert peers.traffic_with(old, "ben", "fp-ben").shown == 1
    columns = {str(r[1]) for r in old.execute("PRAGMA table_info(notices)")}
    assert not columns & {"sender", "room_id", "intent", "kind", "target", "from_session"}
