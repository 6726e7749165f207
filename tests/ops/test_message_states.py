"""Delivery states as ``sent`` reports them, on a real (in-memory) database: final and true."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from crosstalk.core.gate_routing import refusal
from crosstalk.core.link import OutboxItem
from crosstalk.core.room import Applied
from crosstalk.core.triage import Kind
from crosstalk.errors import NotAMember, UnknownMessage
from crosstalk.features.messages.ops import apply_refusal, sent_views
from crosstalk.store.link import drop_post, mark_sent
from crosstalk.store.messages import mark_read, record_receipt, record_sent
from crosstalk.store.migrations import migrate
from crosstalk.store.ui import conversation, room_marks
from crosstalk.wire.room_ops import MessageOp


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    migrate(c)
    c.execute(
        "INSERT INTO rooms (room_id, name, kind, state, created_at) "
        "VALUES ('r1', 'crew', 'shared', 'joined', 0)"
    )
    yield c
    c.close()


def _sent(conn: sqlite3.Connection, msg_id: str) -> OutboxItem:
    cur = conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, created_at) VALUES (?, 'r1', x'00', 1)",
        (msg_id,),
    )
    conn.execute(
        "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, chars, created_at) "
        "VALUES (?, 'r1', '#crew', 'message', 5, 1)",
        (msg_id,),
    )
    assert cur.lastrowid is not None
    return OutboxItem(cur.lastrowid, "r1", msg_id, b"\0")


def test_a_post_the_relay_refused_is_refused_with_its_reason_not_queued(
    conn: sqlite3.Connection,
) -> None:
    """Before: queued. After the relay's refusal: refused, with the relay's code and sentence."""
    item = _sent(conn, "m1")
    [before] = sent_views(conn, 10).sent
    assert (before.state, before.reason) == ("queued", None)
    drop_post(conn, item, NotAMember("You were removed from #crew."), 2.0)
    [after] = sent_views(conn, 10).sent
    assert after.state == "refused"
    assert after.reason == "not_a_member: You were removed from #crew."


def test_marking_read_withdraws_the_notice_and_reports_each_room_once(
    conn: sqlite3.Connection,
) -> None:
    """mark_read sets read_at once (a second ack reports nothing) and withdraws the notice."""
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, intent, body, received_at) "
        "VALUES ('h1', 'r1', 'fp', 'fyi', '{}', 1)"
    )
    conn.execute(
        "INSERT INTO notices (message_id, label, decision, due, created_at) "
        "VALUES ('h1', 'ben', 'notice_when_idle', 'idle', 1)"
    )
    assert mark_read(conn, ["h1", "h1"], 5.0) == {"r1": ["h1"]}
    assert mark_read(conn, ["h1"], 6.0) == {}
    assert conn.execute("SELECT withdrawn_at FROM notices").fetchone() == (5.0,)


# --- a refusal by the recipient's gate ---------------------------------------------------------

BEN = "f" * 64


def _ben_in_room(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO room_members (room_id, fingerprint, label, signing_key, box_key, state) "
        "VALUES ('r1', ?, 'ben', zeroblob(32), zeroblob(32), 'member')", (BEN,)
    )


def _refusal_from(sender: str, msg_id: str, room: str = "r1") -> Applied:
    handoff = MessageOp(msg_id=msg_id, text="take it", kind=Kind.HANDOFF)
    answer = refusal(handoff, msg_id, msg_id="a-" + msg_id, my_label="ben", now=3.0)
    return Applied(room, 7, answer.msg_id, sender, 3.0, answer)


def test_a_handoff_refused_by_the_recipients_gate_is_refused_naming_them(
    conn: sqlite3.Connection,
) -> None:
    """ben's gate refused it after his daemon held it: ana's state is refused, by ben, and why."""
    _ben_in_room(conn)
    item = _sent(conn, "m1")
    mark_sent(conn, item, 1)
    record_receipt(conn, "r1", "m1", "delivered")
    apply_refusal(conn, _refusal_from(BEN, "m1"), me="a" * 64)
    [view] = sent_views(conn, 10).sent
    assert (view.state, view.by) == ("refused", "ben")
    assert view.reason is not None and "ben" in view.reason and "attention" in view.reason
    record_receipt(conn, "r1", "m1", "read")  # a late receipt does not undo it
    assert sent_views(conn, 10).sent[0].state == "refused"


def test_a_refusal_in_another_room_or_from_ourselves_changes_nothing(
    conn: sqlite3.Connection,
) -> None:
    """Only a member of the room the message went to can refuse it; our own refusals (another
    machine of ours refusing someone) are not about what we sent."""
    _ben_in_room(conn)
    mark_sent(conn, _sent(conn, "m1"), 1)
    conn.execute(
        "INSERT INTO rooms (room_id, name, kind, state, created_at) "
        "VALUES ('r2', 'other', 'shared', 'joined', 0)"
    )
    apply_refusal(conn, _refusal_from(BEN, "m1", room="r2"), me="a" * 64)
    apply_refusal(conn, _refusal_from("a" * 64, "m1"), me="a" * 64)
    assert sent_views(conn, 10).sent[0].state == "sent"


# --- paging ------------------------------------------------------------------------------------


def _many(conn: sqlite3.Connection, count: int) -> list[str]:
    ids = [f"m{i:04d}" for i in range(count)]
    for i, msg_id in enumerate(ids):
        record_sent(
            conn, msg_id=msg_id, room_id="r1", to_label="ben", kind="message", chars=3,
            created_at=100.0 + i // 3,  # several share a second: the cursor must not skip them
            thread=None, reply_to=None, text=f"text number {i}\n\x1b[31m" + "x" * 300,
        )
    return ids


def test_paging_with_next_reaches_every_message_once_newest_first(
    conn: sqlite3.Connection,
) -> None:
    """Past the old 1,000 cap: following ``next`` lists every message exactly once."""
    ids = _many(conn, 1203)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = sent_views(conn, 500, before=cursor)
        seen.extend(v.id for v in page.sent)
        if page.next is None:
            break
        cursor = page.next
    assert seen == sorted(ids, key=lambda i: (100.0 + int(i[1:]) // 3, i), reverse=True)


def test_since_lists_only_what_was_sent_at_or_after_it(conn: sqlite3.Connection) -> None:
    """``since`` (wall-clock seconds) cuts the list; the last page has no ``next``."""
    _many(conn, 30)
    page = sent_views(conn, 50, since=108.0)
    assert [v.ts for v in page.sent] == [109.0] * 3 + [108.0] * 3
    assert page.next is None


def test_an_unknown_cursor_is_unknown_message(conn: sqlite3.Connection) -> None:
    """``before`` names a message we sent; anything else is refused, not an empty page."""
    _many(conn, 3)
    with pytest.raises(UnknownMessage):
        sent_views(conn, 10, before="nosuch")


def test_each_row_carries_the_start_of_its_text(conn: sqlite3.Connection) -> None:
    """The view has the start of the text (bounded), for the human list and the page."""
    _many(conn, 1)
    [view] = sent_views(conn, 10).sent
    assert view.text.startswith("text number 0\n") and len(view.text) <= 200


def test_the_page_shows_a_refusal_by_the_recipient_as_the_sent_list_does(
    conn: sqlite3.Connection,
) -> None:
    """The local page reads the same state (refused, with why), and its room mark changes when
    the refusal arrives, so an open page redraws."""
    _ben_in_room(conn)
    mark_sent(conn, _sent(conn, "m1"), 1)
    conn.execute(
        "INSERT INTO ui_sent_words (msg_id, room_id, body, created_at) "
        "VALUES ('m1', 'r1', '{\"text\": \"take it\"}', 1)"
    )
    before = room_marks(conn, ["r1"])
    apply_refusal(conn, _refusal_from(BEN, "m1"), me="a" * 64)
    assert room_marks(conn, ["r1"]) != before
    [entry] = conversation(conn, "r1", "a" * 64)
    assert entry.state == "refused" and entry.reason == sent_views(conn, 1).sent[0].reason
