"""Delivery states as ``sent`` reports them, on a real (in-memory) database: final and true."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest

from crosstalk.core.link import OutboxItem
from crosstalk.errors import NotAMember
from crosstalk.features.messages.ops import sent_views
from crosstalk.store.link import drop_post
from crosstalk.store.messages import mark_read
from crosstalk.store.migrations import migrate


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
        "INSERT INTO notices (message_id, sender, label, intent, kind, decision, due, "
        "created_at) VALUES ('h1', 'fp', 'ben', 'fyi', 'message', 'notice_when_idle', 'idle', 1)"
    )
    assert mark_read(conn, ["h1", "h1"], 5.0) == {"r1": ["h1"]}
    assert mark_read(conn, ["h1"], 6.0) == {}
    assert conn.execute("SELECT withdrawn_at FROM notices").fetchone() == (5.0,)
