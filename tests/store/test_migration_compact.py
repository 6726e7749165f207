"""Migration 29 (a held message is its own search row, store/schema_compact.py): a store filled
before it finds what it found, with the same snippets and filters, and the index stays right."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from crosstalk.store import attention, messages, room_keys, threads
from crosstalk.store.ids import SQL_FUNCTION
from crosstalk.store.migrations import MIGRATIONS, migrate
from crosstalk.store.rooms import Room, add_room
from crosstalk.store.search import Hit
from crosstalk.wire.converter import structure_remote, unstructure
from crosstalk.wire.room_ops import Intent, Kind, MessageOp
from tests.store.test_search_store import BEN, DAY, NOW, consistent, fact, find, hold, put_memory

CARL = "c" * 64


@pytest.fixture
def old(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """A store at version 28 with two rooms, ``r2`` about to be left."""
    connection = sqlite3.connect(tmp_path / "state.db", isolation_level=None)
    migrate(connection, MIGRATIONS[:28])
    add_room(connection, Room("r1", "dev", "shared", "joined", 0, NOW), b"k" * 32)
    add_room(connection, Room("r2", "ops", "shared", "joined", 0, NOW), b"k" * 32)
    yield connection
    connection.close()


def send(conn: sqlite3.Connection, msg_id: str, text: str, room: str = "r1") -> None:
    messages.record_sent(conn, msg_id=msg_id, room_id=room, to_label="ben", kind="message",
                         chars=len(text), created_at=NOW, thread=None, reply_to=None, text=text)


def _fill(conn: sqlite3.Connection) -> None:
    hold(conn, "held", "the gizmo ships on friday after the review", ts=NOW - 3 * DAY,
         slices=[{"kind": "file", "label": "gizmo.py", "content": "x"},
                 {"kind": "note", "label": "review notes", "content": "y"}])
    hold(conn, "carl", "a gizmo review from carl", sender=CARL)
    hold(conn, "decided", "Decided: gizmo", kind="decision")  # not indexed: the decision is
    send(conn, "mine", "my gizmo notes for the review")
    put_memory(conn, "r1", facts=(fact("f1", "gizmo reviews happen weekly"),))
    hold(conn, "ops-held", "gizmo incident in ops", room="r2")
    send(conn, "ops-sent", "gizmo rollback in ops", room="r2")
    room_keys.forget_room(conn, "r2")
    hold(conn, "later", "the gizmo review went well", ts=NOW + DAY)


#: Every filter search takes, as ``find``'s keywords.
FILTERS: tuple[dict[str, object], ...] = (
    {}, {"rooms": ("r1",)}, {"rooms": ("r2",)}, {"senders": (BEN,)}, {"senders": (CARL,)},
    {"senders": ("",)}, {"since": NOW - DAY}, {"kind": "message"}, {"kind": "fact"},
    {"limit": 2},
)


def _everything(conn: sqlite3.Connection) -> list[list[Hit]]:
    return [find(conn, words, **filters)  # type: ignore[arg-type]
            for words in ("gizmo", "review*", "notes") for filters in FILTERS]


def test_migration_29_finds_what_version_28_found_with_the_same_snippets(
    old: sqlite3.Connection,
) -> None:
    """Every search, under every filter, finds the same hits in the same order, snippets,
    rooms, senders and times included; the held messages' search rows are gone."""
    _fill(old)
    before = _everything(old)
    assert sorted(h.id for h in before[0]) == [
        "carl", "f1", "held", "later", "mine", "ops-held", "ops-sent"]
    assert migrate(old, MIGRATIONS[:29]) == [29]
    assert _everything(old) == before
    rows = sorted(r[0] for r in old.execute("SELECT ref FROM search_docs WHERE kind = 'message'"))
    assert rows == ["mine", "ops-held", "ops-sent"]  # ops-held: the left room's kept copy
    consistent(old)


def test_held_messages_and_search_rows_share_one_growing_rowid_space(
    old: sqlite3.Connection,
) -> None:
    """Held rowids and search ids never meet and follow the order things came in (the search
    window's newest matches, watch's cursors); rewrites, deletes and a leave keep the index
    right."""
    migrate(old)
    _fill(old)
    held = [r[0] for r in old.execute("SELECT rowid FROM held_messages ORDER BY rowid")]
    docs = [r[0] for r in old.execute("SELECT id FROM search_docs")]
    assert not set(held) & set(docs)
    mine = old.execute("SELECT id FROM search_docs WHERE ref = 'mine'").fetchone()[0]
    later = old.execute("SELECT rowid FROM held_messages WHERE message_id = 'later'").fetchone()
    assert held[-1] == later[0] > mine  # held after the send: a larger rowid
    old.execute("UPDATE held_messages SET body = json_set(body, '$.text', 'widget now') "
                "WHERE message_id = 'held'")
    assert [h.id for h in find(old, "widget")] == ["held"]
    hits = find(old, "gizmo", rooms=("r1",), since=NOW - 4 * DAY, senders=(BEN,),
                kind="message")
    assert {h.id: h.snippet for h in hits} == {
        "held": "[gizmo].py review notes", "later": "the [gizmo] review went well"}
    assert find(old, "friday") == []
    consistent(old)
    old.execute("DELETE FROM held_messages WHERE message_id IN ('held', 'carl')")
    assert sorted(h.id for h in find(old, "gizmo")) == [
        "f1", "later", "mine", "ops-held", "ops-sent"]
    consistent(old)
    room_keys.forget_room(old, "r1")  # left: its held messages keep a search row of their own
    assert sorted(h.id for h in find(old, "review")) == ["f1", "later", "mine"]
    assert old.execute("SELECT count(*) FROM held_messages").fetchone()[0] == 0
    consistent(old)


def test_a_hold_on_a_search_rows_id_is_refused(old: sqlite3.Connection) -> None:
    """A message held with a rowid a search row has (not through messages.hold) would share its
    index entry: the trigger refuses it, and the store is as it was."""
    migrate(old)
    send(old, "mine", "my gizmo notes")
    (taken,) = old.execute("SELECT id FROM search_docs WHERE ref = 'mine'").fetchone()
    with pytest.raises(sqlite3.IntegrityError, match="rowid taken by a search row"):
        old.execute("INSERT INTO held_messages (rowid, message_id, room_id, sender, intent, "
                    "body, received_at) VALUES (?, 'clash', 'r1', ?, 'fyi', "
                    "'{\"text\":\"gizmo clash\"}', ?)", (taken, BEN, NOW))
    assert [h.id for h in find(old, "gizmo")] == ["mine"]
    consistent(old)


def test_a_hold_takes_a_rowid_above_every_held_message_whatever_the_counter_says(
    old: sqlite3.Connection,
) -> None:
    """The rowid a hold takes is above the counter and above every held message: a store whose
    index triggers are gone (bench/search.py's plain store) still holds one message after
    another, and watch's cursors still grow."""
    migrate(old)
    for name in ("ai", "bu", "au", "bd", "kept"):
        old.execute(f"DROP TRIGGER search_held_{name}")
    hold(old, "m1", "first")
    hold(old, "m2", "second")
    assert [r.cursor for r in messages.held_rows(old, include_read=True, targets=None)] == [1, 2]


def test_without_the_refusal_a_clash_shows_in_the_integrity_check(
    old: sqlite3.Connection,
) -> None:
    """Planted bug: the insert trigger without its refusal lets a held message take a search
    row's id; the check the tests above rely on then fails."""
    migrate(old)
    send(old, "mine", "my gizmo notes")
    (taken,) = old.execute("SELECT id FROM search_docs WHERE ref = 'mine'").fetchone()
    old.execute("DROP TRIGGER search_held_ai")
    old.execute("CREATE TRIGGER search_held_ai AFTER INSERT ON held_messages BEGIN "
                "INSERT INTO search_fts (rowid, text, extra) SELECT id, text, extra "
                "FROM search_text WHERE id = NEW.rowid; END")
    with pytest.raises(sqlite3.DatabaseError):
        old.execute("INSERT INTO held_messages (rowid, message_id, room_id, sender, intent, "
                    "body, received_at) VALUES (?, 'clash', 'r1', ?, 'fyi', "
                    "'{\"text\":\"gizmo clash\"}', ?)", (taken, BEN, NOW))
        consistent(old)


# --- a held body without its defaults -------------------------------------------------------------


@pytest.mark.parametrize("intent, kind", [(Intent.FYI, Kind.MESSAGE), (Intent.QUESTION, Kind.ASK)])
def test_a_held_body_leaves_out_the_default_intent_and_kind(intent: Intent, kind: Kind) -> None:
    """The row keeps an ``fyi`` intent and ``message`` kind by leaving them out, and no
    sender's clock; the op read back (with its id from the row) is the op sent but for that
    clock, and other values stay in the body."""
    op = MessageOp("0" * 32, "hello", intent, kind, from_label="ana", sent_at=NOW)
    body = messages.body_json(unstructure(op))
    assert ('"intent"' in body, '"kind"' in body) == (intent != Intent.FYI, kind != Kind.MESSAGE)
    assert "sent_at" not in body
    read_back = structure_remote({**json.loads(body), "msg_id": op.msg_id}, MessageOp)
    assert read_back == attrs.evolve(op, sent_at=0.0)


# --- ids as blobs ---------------------------------------------------------------------------------

HEX = "0123456789abcdef" * 2
OTHER = "fedcba9876543210" * 2


def _v28_rows(conn: sqlite3.Connection) -> None:
    """A held message, its notice and record entry as version 28 wrote them: ids as text."""
    for msg_id, text in ((HEX, "the gizmo ships"), (OTHER, "another gizmo"), ("m1", "gizmo")):
        conn.execute("INSERT INTO held_messages (message_id, room_id, sender, intent, body, "
                     "received_at) VALUES (?, 'r1', ?, 'fyi', ?, ?)",
                     (msg_id, BEN, json.dumps({"text": text, "relay_ts": NOW}), NOW))
    conn.execute("INSERT INTO notices (message_id, label, decision, due, created_at) "
                 "VALUES (?, 'ben', 'notice_now', 'now', ?)", (HEX, NOW))
    conn.execute("INSERT INTO attention_record (item, source, ts, decision) "
                 "VALUES (?, 'ben', ?, 'notice_now')", (HEX, NOW))


def _reads(conn: sqlite3.Connection) -> tuple[object, ...]:
    """What every reader of those rows shows, ids as hex strings."""
    return (
        [r.message_id for r in messages.held_with_ids(conn, [HEX, "m1"])],
        [r.message_id for r in messages.held_rows(conn, include_read=False, targets=None)],
        messages.held_ids_from(conn, HEX[:5]), threads.reply_target(conn, OTHER[:6]),
        [n.message_id for n in attention.list_notices(conn)], attention.has_notice(conn, HEX),
        [e.item for e in attention.attention_entries(conn, NOW - 1)],
        sorted(h.id for h in find(conn, "gizmo")),
    )


def test_migration_29_keeps_message_ids_as_blobs_and_every_read_shows_hex(
    old: sqlite3.Connection,
) -> None:
    """Held messages', notices' and the record's 32-hex-digit ids become their 16 bytes (other
    ids stay text); every reader shows what it showed before, and new rows are kept alike."""
    _v28_rows(old)
    migrate(old)
    assert _reads(old) == (
        [HEX, "m1"], [HEX, OTHER, "m1"], [HEX], (OTHER, OTHER), [HEX], True, [HEX],
        sorted([HEX, OTHER, "m1"]),
    )
    kinds = old.execute(
        "SELECT (SELECT group_concat(typeof(message_id)) FROM (SELECT message_id "
        "FROM held_messages ORDER BY rowid)), (SELECT typeof(message_id) FROM notices), "
        "(SELECT typeof(item) FROM attention_record)"
    ).fetchone()
    assert kinds == ("blob,blob,text", "blob", "blob")
    hold(old, "ab" * 16, "a new gizmo")
    assert old.execute("SELECT typeof(message_id) FROM held_messages WHERE message_id = ?",
                       (bytes.fromhex("ab" * 16),)).fetchone() == ("blob",)
    assert [r.message_id for r in messages.held_with_ids(old, ["ab" * 16])] == ["ab" * 16]


def test_a_step_29_that_kept_text_ids_would_lose_every_old_message(
    old: sqlite3.Connection,
) -> None:
    """Planted bug: step 29 without its conversion of stored ids; the readers, which look
    ids up as blobs, no longer find the old rows, and the test above would say so."""
    _v28_rows(old)
    step = MIGRATIONS[28]
    converting = tuple(s for s in step.statements if SQL_FUNCTION not in s)
    migrate(old, (*MIGRATIONS[:28], attrs.evolve(step, statements=converting)))
    assert messages.held_with_ids(old, [HEX]) == [] and not attention.has_notice(old, HEX)


def test_a_left_rooms_kept_row_is_keyed_by_the_ids_text_and_gives_way_on_a_rejoin(
    old: sqlite3.Connection,
) -> None:
    """A held message with a blob id leaves a kept row named by its hex id when its room is
    left; held again after a rejoin, the message replaces that row."""
    migrate(old)
    hold(old, HEX, "welcome back", room="r2")
    room_keys.forget_room(old, "r2")
    assert old.execute("SELECT key, ref FROM search_docs").fetchall() == [(f"m:{HEX}", HEX)]
    assert [(h.id, h.room) for h in find(old, "welcome")] == [(HEX, "ops")]
    old.execute("UPDATE rooms SET state = 'joined' WHERE room_id = 'r2'")
    hold(old, HEX, "welcome back", room="r2")
    assert old.execute("SELECT count(*) FROM search_docs").fetchone() == (0,)
    assert [h.id for h in find(old, "welcome")] == [HEX]
    consistent(old)
