"""A receipt for a message we sent is kept whatever order it arrives in.

The send commits the post to the outbox first and records the message afterwards; a reader on a
fast link can hold, read and answer with a receipt in between (seed 73 of the simulation). The
receipt must survive that, and a receipt for something this machine did not post makes nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.core.delivery import Event, Step, receipt_event, settle
from crosstalk.core.link import OutboxItem
from crosstalk.store import messages
from crosstalk.store.db import connect
from crosstalk.store.link import mark_sent
from crosstalk.store.migrations import migrate
from crosstalk.store.rooms import Room, add_room

ROOM = "r" * 32
MSG = "m" * 32


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = connect(tmp_path / "state.db")
    add_room(db, Room(ROOM, "team", "shared", "joined", 0, 0.0), b"k" * 32)
    try:
        yield db
    finally:
        db.close()


def _posted(conn: sqlite3.Connection, op_id: str = MSG) -> None:
    conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, state, created_at) "
        "VALUES (?, ?, x'00', 'sent', 0)",
        (op_id, ROOM),
    )


def _record(conn: sqlite3.Connection) -> None:
    messages.record_sent(
        conn, msg_id=MSG, room_id=ROOM, to_label="ben", kind="message", chars=2,
        created_at=5.0, thread=None, reply_to=None, text="hi",
    )


@pytest.mark.parametrize("receipts", [["read"], ["delivered"], ["delivered", "read"]])
def test_a_receipt_that_beats_the_record_of_the_send_is_kept(
    conn: sqlite3.Connection, receipts: list[str]
) -> None:
    _posted(conn)
    for state in receipts:
        messages.record_receipt(conn, ROOM, MSG, state)
    _record(conn)
    assert messages.delivery_state(conn, MSG) == (receipts[-1], None)
    (row,) = messages.recent_sent(conn, 10)
    assert (row.msg_id, row.to_label, row.kind, row.created_at) == (MSG, "ben", "message", 5.0)


def test_in_order_a_receipt_moves_the_state_forward_only(conn: sqlite3.Connection) -> None:
    _posted(conn)
    _record(conn)
    assert messages.delivery_state(conn, MSG) == ("sent", None)
    messages.record_receipt(conn, ROOM, MSG, "read")
    messages.record_receipt(conn, ROOM, MSG, "delivered")
    assert messages.delivery_state(conn, MSG) == ("read", None)


def test_a_receipt_for_what_we_did_not_post_makes_no_row(conn: sqlite3.Connection) -> None:
    """Another machine of ours sent it, or a member names an id that is not ours."""
    messages.record_receipt(conn, ROOM, MSG, "read")
    _posted(conn, "o" * 32)
    messages.record_receipt(conn, ROOM, "o" * 32, "read")  # posted from here: kept
    assert [r.msg_id for r in messages.recent_sent(conn, 10)] == ["o" * 32]
    messages.record_receipt(conn, "x" * 32, "o" * 32, "read")  # same id, wrong room
    assert len(messages.recent_sent(conn, 10)) == 1


# --- property: what the store says is the furthest true state ----------------------------------

STEPS = st.lists(
    st.sampled_from(["posted", "delivered", "read", "refused-ben", "refused-cy"]), max_size=12
)


@settings(max_examples=60, deadline=None)
@given(STEPS, st.booleans())
def test_any_order_of_answers_receipts_and_refusals_stores_the_furthest_true_state(
    steps: list[str], recorded_first: bool
) -> None:
    """Relay answer, receipts (duplicated, out of order) and gate refusals, written as the
    daemon writes them, read back as the core's furthest state: refused is terminal, read beats
    delivered, nothing moves back."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    migrate(db)
    add_room(db, Room(ROOM, "team", "shared", "joined", 0, 0.0), b"k" * 32)
    cur = db.execute(
        "INSERT INTO outbox (op_id, room_id, frame, created_at) VALUES (?, ?, x'00', 0)",
        (MSG, ROOM),
    )
    item = OutboxItem(int(cur.lastrowid or 0), ROOM, MSG, b"\0")
    if recorded_first:
        _record(db)
    events: list[Event] = []
    for step in steps:
        if step == "posted":
            mark_sent(db, item, 1)
            events.append(Event(Step.POSTED))
        elif step.startswith("refused-"):
            who = step.removeprefix("refused-")
            messages.record_refusal(db, ROOM, MSG, by=who, reason=f"{who} said no")
            events.append(Event(Step.REFUSED, by=who, reason=f"{who} said no"))
        else:
            messages.record_receipt(db, ROOM, MSG, step)
            events.append(receipt_event(step))
    if not recorded_first:
        _record(db)
    assert messages.delivery(db, MSG) == settle(events)
    db.close()
