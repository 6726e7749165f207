"""The relay link's copies of sealed ops go once done (issue 41, item 4; store/retention.py).

An outbox row goes only when the relay sequenced it AND nothing waits on it: room memory has
passed its seq (our own ops are applied from it) and no memory op outcome is still to report
(``memory_sent``). An inbound row goes only when the room applied it AND memory passed it, and
never as a room's newest (the relay's clock is read from it). A message's ``sent`` outlives its
row. Each rule is checked by :func:`_wrongly_gone`, which a planted bug shows can fail.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from crosstalk.core.link import OutboxItem
from crosstalk.store import link, messages, retention
from crosstalk.store.db import connect
from crosstalk.store.reservations import relay_now
from crosstalk.store.rooms import Room, add_room

ROOM = "r" * 32
OTHER = "o" * 32
OLD, CUTOFF = 1_000.0, 5_000.0
MEMORY_AT, APPLIED_AT = 10, 12


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    db = connect(tmp_path / "state.db")
    for room in (ROOM, OTHER):
        add_room(db, Room(room, room[:4], "shared", "joined", 0, 0.0), b"k" * 32)
    for room, memory, applied in ((ROOM, MEMORY_AT, APPLIED_AT), (OTHER, 5, 5)):
        db.execute("INSERT INTO memory_rooms (room_id, last_seq) VALUES (?, ?)", (room, memory))
        db.execute("INSERT INTO room_cursors (room_id, seq) VALUES (?, ?)", (room, applied))
    try:
        yield db
    finally:
        db.close()


def _post(conn: sqlite3.Connection, op_id: str, seq: int | None, *, at: float = OLD) -> None:
    state = "queued" if seq is None else "sent"
    conn.execute(
        "INSERT INTO outbox (op_id, room_id, frame, state, seq, created_at) "
        "VALUES (?, ?, x'00', ?, ?, ?)",
        (op_id, ROOM, state, seq, at),
    )


def _inbound(conn: sqlite3.Connection, op_id: str, seq: int, *, room: str = ROOM) -> None:
    conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, 'fp', x'00', ?, ?)",
        (room, op_id, seq, OLD + seq + 100.0, OLD + seq),
    )


def _plant(conn: sqlite3.Connection) -> None:
    """One row of every kind the rules tell apart."""
    _post(conn, "done", 3)
    _post(conn, "reporting", 4)
    conn.execute(
        "INSERT INTO memory_sent (op_id, room_id, kind, body, created_at) "
        "VALUES ('reporting', ?, 'AddFact', '{}', ?)",
        (ROOM, OLD),
    )
    _post(conn, "queued", None)
    _post(conn, "unpassed", MEMORY_AT + 1)
    _post(conn, "recent", 5, at=CUTOFF + 1)
    for op_id, seq in (("in-done", 5), ("in-unpassed", MEMORY_AT + 1),
                       ("in-unapplied", APPLIED_AT + 1)):
        _inbound(conn, op_id, seq)
    _inbound(conn, "in-other-old", 1, room=OTHER)
    _inbound(conn, "in-other-newest", 2, room=OTHER)


@attrs.frozen
class Copy:
    """One of the link's copies as it was before the trim."""

    table: str
    room: str
    seq: int | None
    at: float


def _copies(conn: sqlite3.Connection) -> dict[str, Copy]:
    rows = conn.execute(
        "SELECT op_id, 'outbox', room_id, seq, created_at FROM outbox "
        "UNION ALL SELECT op_id, 'relay_inbound', room_id, seq, received_at FROM relay_inbound"
    )
    return {str(r[0]): Copy(str(r[1]), str(r[2]), r[3], float(r[4])) for r in rows}


def _still_needed(conn: sqlite3.Connection, op_id: str, copy: Copy, newest: int) -> str | None:
    """Why the copy had to stay, or None when it was done."""
    memory = conn.execute(
        "SELECT last_seq FROM memory_rooms WHERE room_id = ?", (copy.room,)
    ).fetchone()
    if copy.seq is None or memory is None or copy.seq > int(memory[0]):
        return "not sequenced, or not passed by memory"
    if copy.at >= CUTOFF:
        return "within the grace"
    if copy.table == "outbox":
        waits = conn.execute("SELECT 1 FROM memory_sent WHERE op_id = ?", (op_id,)).fetchone()
        return None if waits is None else "its outcome is still to report"
    applied = conn.execute(
        "SELECT seq FROM room_cursors WHERE room_id = ?", (copy.room,)
    ).fetchone()
    if applied is None or copy.seq > int(applied[0]):
        return "not applied"
    return "its room's newest" if copy.seq >= newest else None


def _wrongly_gone(conn: sqlite3.Connection, before: dict[str, Copy]) -> list[str]:
    """The copies that went although something still needed them (empty: the rules held)."""
    after = _copies(conn)
    newest: dict[str, int] = {}
    for copy in before.values():
        if copy.table == "relay_inbound" and copy.seq is not None:
            newest[copy.room] = max(copy.seq, newest.get(copy.room, 0))
    wrong = []
    for op_id, copy in before.items():
        why = None if op_id in after else _still_needed(
            conn, op_id, copy, newest.get(copy.room, 0)
        )
        if why is not None:
            wrong.append(f"{op_id}: {why}")
    return wrong


def _trimmed(conn: sqlite3.Connection, trim: Callable[[sqlite3.Connection], object]) -> set[str]:
    """Plant every kind of row, trim, check; the ids that went."""
    _plant(conn)
    before = _copies(conn)
    trim(conn)
    wrong = _wrongly_gone(conn, before)
    assert not wrong, wrong
    return set(before) - set(_copies(conn))


def test_only_sequenced_passed_rows_nobody_waits_on_go(conn: sqlite3.Connection) -> None:
    """Of every kind of row, exactly the done ones go: the rest are still needed."""
    gone = _trimmed(conn, lambda c: retention.trim(c, CUTOFF))
    assert gone == {"done", "in-done", "in-other-old"}


def test_a_planted_rule_that_ignores_a_waiting_report_is_caught(
    conn: sqlite3.Connection,
) -> None:
    """The checker fails on a trim that deletes every sequenced post memory passed."""

    def careless(c: sqlite3.Connection) -> None:
        c.execute(
            "DELETE FROM outbox WHERE state = 'sent' AND created_at < ? AND seq <= "
            "(SELECT last_seq FROM memory_rooms m WHERE m.room_id = outbox.room_id)",
            (CUTOFF,),
        )

    with pytest.raises(AssertionError, match="reporting: its outcome is still to report"):
        _trimmed(conn, careless)


def test_a_planted_rule_that_trims_a_room_s_newest_inbound_row_is_caught(
    conn: sqlite3.Connection,
) -> None:
    """The checker fails on a trim that takes every applied, passed inbound row."""

    def careless(c: sqlite3.Connection) -> None:
        c.execute(
            "DELETE FROM relay_inbound WHERE seq <= "
            "(SELECT min(m.last_seq, r.seq) FROM memory_rooms m JOIN room_cursors r "
            "USING (room_id) WHERE m.room_id = relay_inbound.room_id)"
        )

    with pytest.raises(AssertionError, match="in-other-newest: its room's newest"):
        _trimmed(conn, careless)


def test_trim_touches_nothing_but_the_link_copies(conn: sqlite3.Connection) -> None:
    """Old read messages are prune's (after 30 days), not trim's."""
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, intent, body, received_at, "
        "read_at) VALUES ('m', ?, 'fp', 'fyi', '{}', ?, ?)",
        (ROOM, OLD, OLD),
    )
    assert set(retention.trim(conn, CUTOFF)) == set(retention.LINK_COPIES)
    assert conn.execute("SELECT count(*) FROM held_messages").fetchone()[0] == 1


def test_a_sent_message_still_reads_sent_once_its_outbox_row_is_trimmed(
    conn: sqlite3.Connection,
) -> None:
    """mark_sent writes the message's seq on its sent_messages row; the state survives trim."""
    item = link.queue_post(conn, ROOM, "msg", b"sealed", OLD)
    assert item is not None
    messages.record_sent(
        conn, msg_id="msg", room_id=ROOM, to_label="ben", kind="message", chars=2,
        created_at=OLD, thread=None, reply_to=None, text="hi",
    )
    assert messages.delivery_state(conn, "msg") == ("queued", None)
    link.mark_sent(conn, OutboxItem(item.id, ROOM, "msg", b"sealed"), 7, OLD)
    assert retention.trim(conn, CUTOFF)["outbox"] == 1
    assert messages.delivery_state(conn, "msg") == ("sent", None)
    assert link.post_state(conn, "msg") == "sent"
    messages.record_receipt(conn, ROOM, "msg", "delivered")
    assert messages.delivery_state(conn, "msg") == ("delivered", None)


def test_the_relay_clock_is_still_read_after_a_trim(conn: sqlite3.Connection) -> None:
    """Each room's newest inbound row stays, so relay_now keeps the relay's lead on our clock."""
    for op_id, seq in (("a", 1), ("b", 2)):
        _inbound(conn, op_id, seq)
    retention.trim(conn, CUTOFF)
    assert [r[0] for r in conn.execute("SELECT op_id FROM relay_inbound")] == ["b"]
    assert relay_now(conn, now=OLD + 2) == OLD + 2 + 100.0
