"""Flat in history: every query on a per-event path is indexed and bounded.

A daemon runs for months, so a hook event, a ``read``, an ``ack``, ``status``, ``peers``, the
gate's surfacing, a receipt or an arriving op must not cost more as history grows. Each case
below calls the real query function on a migrated, empty ``state.db`` with SQLite's trace hook
on, then asks ``EXPLAIN QUERY PLAN`` about every statement it ran. A plan fails when it walks a
growing table (or one of its indexes) from end to end: a ``SCAN`` is allowed only through a
partial index that holds unfinished rows alone (its size is the pending work), or when the
statement has a ``LIMIT``. No timing here: the plan is the whole claim.
"""

from __future__ import annotations

import inspect
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crosstalk.core.link import OutboxItem
from crosstalk.core.room import Applied
from crosstalk.features.attention import sessions as session_ops
from crosstalk.features.inbox.actor import load_pending, pushable_sessions
from crosstalk.features.messages import ops as message_ops
from crosstalk.features.peers import ops as peers_ops
from crosstalk.features.read import ops as read_ops
from crosstalk.store import attention as db
from crosstalk.store import edits as edit_rows
from crosstalk.store import gate as gate_records
from crosstalk.store import (
    link,
    memory,
    messages,
    receipts,
    retention,
    room_log,
    rooms,
    sessions,
)
from crosstalk.store.db import connect
from crosstalk.wire.room_ops import EditedPath, EditsPublished

#: Tables that grow with every message (or op) over a daemon's life. ``sessions`` is not one:
#: a session not seen for the retention period is pruned, and ``status`` lists them all. Nor are
#: ``outbox`` and ``relay_inbound`` since migration 26: their rows are trimmed moments after
#: they are done (crosstalk/store/retention.py ``trim``), so they hold the pending work alone.
GROWING = {
    "held_messages", "notices", "attention_record", "sent_messages",
    "refused_ops", "memory_outcomes", "room_ops", "ui_sent_words", "search_docs",
}
#: Partial indexes holding only unfinished rows (crosstalk/store/schema_hot.py).
BOUNDED = {"notices_to_show", "notices_held", "outbox_queued"}

#: The room actor's batch query (crosstalk/store/room_log.py; checked to be there, word for word).
ROOM_BATCH = (
    "SELECT op_id, seq, sender, body, relay_ts FROM relay_inbound "
    "WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?"
)
NOW = 1_000_000.0


def _hot_paths(conn: sqlite3.Connection) -> dict[str, Callable[[], object]]:
    """Each per-event path, as the real function the daemon calls for it."""
    sessions.register_session(
        conn, name="s1", client="claude", project="p", inbox_socket="/tmp/x", now=NOW
    )
    return {
        "hook: session_register": lambda: sessions.register_session(
            conn, name="s1", client="claude", project="p", inbox_socket=None, now=NOW
        ),
        "hook: session_status": lambda: sessions.set_status(
            conn, "s1", sessions.SessionStatus.BUSY, NOW
        ),
        "hook: notices pending": lambda: session_ops._notices(
            conn, session_ops.NoticesParams(session="s1", pending=True, words=True)
        ),
        "hook: notice_shown": lambda: db.mark_shown(conn, ["m1", "m2"], "s1", NOW),
        "status: sessions": lambda: sessions.list_sessions(conn),
        "read": lambda: read_ops.held_views(conn, include_read=False, session="s1", me="me"),
        "read: mark read": lambda: messages.mark_read(conn, ["m1"], NOW),
        "ack: find by prefix": lambda: _quiet(lambda: read_ops.find_held(conn, "abcd1234")),
        "peers": lambda: peers_ops._peers(conn, {}, NOW, "me"),
        "gate: decided?": lambda: db.has_notice(conn, "m1"),
        "gate: held notices": lambda: db.held_notices(conn),
        "gate: held notices for a session": lambda: db.held_notices(conn, "s1", "p"),
        "gate: releasable notices": lambda: db.releasable_notices(conn, [("s1", "p")]),
        "gate: releasable for a turned session": lambda: db.releasable_notices(
            conn, [("s1", "p"), ("s2", "")], ("s1", "p")
        ),
        "gate: quiet holds by source": lambda: db.quiet_held_sources(conn),
        "gate: surface": lambda: db.mark_surfaced(conn, "m1", "s1", "b1", NOW),
        "gate: undecided since": lambda: gate_records.undecided(conn, NOW - 60),
        "inbox: pending pushes": lambda: load_pending(conn, NOW),
        "receipt: delivery state": lambda: messages.delivery_state(conn, "m1"),
        "receipt: owe": lambda: receipts.owe(conn, "read", "r1", ["m1"], NOW),
        "receipt: owed": lambda: receipts.owed(conn),
        "receipt: settle": lambda: receipts.settle(conn, [1]),
        "send: sent list": lambda: message_ops.sent_views(conn, 20),
        "link: load": lambda: link.load(conn, "ws://relay"),
        "link: mark sent": lambda: link.mark_sent(
            conn, OutboxItem(1, "r1", "m1", b"x"), 5
        ),
        "apply: own op at seq": lambda: memory.own_op_at(conn, "r1", 5),
        "apply: own ops after": lambda: memory.own_ops_from(conn, "r1", 5),
        "apply: inbound at seq": lambda: memory.inbound_at(conn, "r1", 5),
        "apply: room batch": lambda: room_log.inbound_after(conn, "r1", 0, 500),
        "apply: room batch after the applied cursor": lambda: room_log.pending(conn, "r1", 200),
        "apply: roster signing keys": lambda: rooms.signing_keys(conn, "r1"),
        "retention: prune": lambda: retention.prune(conn, NOW - 86400),
        "edits: check": lambda: edit_rows.peer_edits_on(conn, "shop", ["a.py", "b.py"], NOW),
        "edits: record own": lambda: edit_rows.replace_own(
            conn, "s1", "shop", [EditedPath("a.py", NOW)], NOW - 1800
        ),
        "edits: own set": lambda: edit_rows.own_set(conn, "s1", "shop"),
        "edits: apply": lambda: edit_rows.apply_published(conn, Applied(
            "r1", 1, "o1", "ben", NOW, EditsPublished("shop", "s", (EditedPath("a", NOW),))
        ), me="me"),
        "edits: sharing rooms": lambda: edit_rows.sharing_inputs(conn),
    }


def _quiet(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception:  # an empty store names no message; the query still ran
        return None


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(tmp_path / "state.db")
    yield connection
    connection.close()


def _traced(conn: sqlite3.Connection, fn: Callable[[], object]) -> list[str]:
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        fn()
    finally:
        conn.set_trace_callback(None)
    return [s for s in statements if s.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE",
                                                                     "INSERT", "WITH"))]


def _full_scans(conn: sqlite3.Connection, statement: str) -> list[str]:
    """The plan lines that walk a growing table whole."""
    plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
    bad = []
    for line in plan:
        found = re.match(r"SCAN (\w+)(?: AS \w+)?(?: USING (?:COVERING )?INDEX (\w+))?", line)
        if found is None:
            continue
        table, index = found.group(1), found.group(2)
        aliases = re.findall(r"\b(?:FROM|JOIN)\s+(\w+)(?:\s+AS)?\s+(\w+)", statement, re.I)
        table = next((t for t, alias in aliases if alias == table), table)
        if table not in GROWING or index in BOUNDED:
            continue
        if index is not None and re.search(r"\bLIMIT\b", statement, re.IGNORECASE):
            continue
        bad.append(line)
    return bad


def test_the_room_batch_query_is_the_one_the_room_actor_runs() -> None:
    source = " ".join(re.findall(r'"([^"]*)"', inspect.getsource(room_log)))
    assert ROOM_BATCH in re.sub(r"\s+", " ", source)


def test_every_hot_path_runs_some_sql(conn: sqlite3.Connection) -> None:
    for name, path in _hot_paths(conn).items():
        assert _traced(conn, path), f"{name} ran no SQL: the case tests nothing"


def test_no_hot_query_scans_a_growing_table(conn: sqlite3.Connection) -> None:
    failures = {}
    for case, path in _hot_paths(conn).items():
        conn.execute("BEGIN")
        try:
            for statement in _traced(conn, path):
                bad = _full_scans(conn, statement)
                if bad:
                    failures.setdefault(case, []).append((statement, bad))
        finally:
            conn.execute("ROLLBACK")
    assert not failures, "\n".join(
        f"{case}: {stmt!r} -> {lines}" for case, found in failures.items() for stmt, lines in found
    )


def test_the_checker_catches_a_full_scan(conn: sqlite3.Connection) -> None:
    assert _full_scans(conn, "SELECT * FROM held_messages WHERE body LIKE '%x%'")
    assert _full_scans(conn, "SELECT * FROM notices n WHERE n.label = 'x'")
    assert not _full_scans(conn, "SELECT * FROM held_messages WHERE message_id = 'm'")


#: The gate's reads of held notices, run on every busy/idle turn and after every gate input.
GATE_HELD = (
    "gate: held notices", "gate: held notices for a session", "gate: releasable notices",
    "gate: releasable for a turned session", "gate: quiet holds by source",
)


def test_the_gate_reads_held_notices_through_the_pending_index(conn: sqlite3.Connection) -> None:
    """A ``SEARCH`` is not enough: an index on ``surfaced_at`` (``notices_waiting`` before
    migration 26) also holds every notice read, dropped or refused without surfacing, so it
    grows with history."""
    paths = _hot_paths(conn)
    for case in GATE_HELD:
        for statement in _traced(conn, paths[case]):
            plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
            used = [line for line in plan if "notices" in line.split(" USING")[0]]
            assert used and all("INDEX notices_held" in line for line in used), (case, plan)


def test_the_gate_reads_live_sessions_through_the_last_seen_index(
    conn: sqlite3.Connection,
) -> None:
    """Retention keeps a month of sessions; every busy/idle turn and arrival reads the live
    ones (the last hours), so the read searches by ``last_seen`` instead of loading them all."""
    sessions.register_session(
        conn, name="old", client="claude", project="p", inbox_socket=None, now=NOW - 86400 * 7
    )
    sessions.register_session(
        conn, name="s1", client="claude", project="p", inbox_socket=None, now=NOW
    )
    statements = _traced(conn, lambda: gate_records.live(conn, NOW))
    assert statements
    for statement in statements:
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
        assert any("sessions USING INDEX sessions_by_last_seen" in line for line in plan), plan
    assert [s.name for s in gate_records.live(conn, NOW)] == ["s1"]


def test_the_inbox_reads_live_sessions_through_the_last_seen_index(
    conn: sqlite3.Connection,
) -> None:
    """The inbox keeper and each session's actor read the pushable sessions after every
    committed batch: by ``last_seen``, not every session retention keeps."""
    sessions.register_session(
        conn, name="old", client="claude", project="p", inbox_socket="/tmp/o", now=NOW - 86400 * 7
    )
    sessions.register_session(
        conn, name="s1", client="claude", project="p", inbox_socket="/tmp/x", now=NOW
    )
    statements = _traced(conn, lambda: pushable_sessions(conn, NOW))
    assert statements
    for statement in statements:
        plan = [str(row[3]) for row in conn.execute("EXPLAIN QUERY PLAN " + statement)]
        assert any("sessions USING INDEX sessions_by_last_seen" in line for line in plan), plan
    assert [s.name for s in pushable_sessions(conn, NOW)] == ["s1"]
