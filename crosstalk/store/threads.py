"""Threads: which messages make one, in what order, and whether it was closed.

Theory of operation
-------------------
A thread is named by a key: the ``--thread`` a sender gave, or, for a reply sent without one,
the thread of the message it replies to, else that message's own id (so replying starts a
thread rooted at the message replied to). :func:`reply_target` checks ``--reply-to`` against
what we hold or sent (``unknown_message`` otherwise) and gives the key the reply joins.
``crosstalk thread ID`` takes a thread key or the id (or unique prefix) of any message in it
(:func:`thread_key`). Its messages are what we received and what we sent under that key, plus
the root message itself, oldest first. Closing posts a message carrying the summary with
``closes_thread`` set into every room the thread went through; each participant's applier
(:func:`apply_closing`) records it in ``threads``, as the closer's daemon does at once.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crosstalk.core.room import Applied
from crosstalk.errors import UnknownMessage
from crosstalk.store.gate import source_of
from crosstalk.store.ids import from_db, prefix_where, to_db
from crosstalk.wire.control.replies.messages import ThreadMessage, ThreadView
from crosstalk.wire.room_ops import MessageOp

MIN_PREFIX = 6


def _by_prefix(conn: sqlite3.Connection, ref: str) -> tuple[str, str | None] | None:
    """The message ``ref`` names (id or unique prefix, held or sent) and its thread."""
    ref = ref.strip().lower()
    if len(ref) < MIN_PREFIX or not all(c in "0123456789abcdef" for c in ref):
        return None
    hits: dict[str, str | None] = {}
    where, args = prefix_where("message_id", ref)
    for msg_id, body in conn.execute(
        f"SELECT message_id, body FROM held_messages WHERE {where}", args
    ).fetchall():
        hits[from_db(msg_id)] = json.loads(body).get("thread")
    for msg_id, thread in conn.execute(
        "SELECT msg_id, thread FROM sent_messages WHERE msg_id >= ? AND msg_id < ?",
        (ref, ref + "g"),
    ).fetchall():
        hits[str(msg_id)] = thread
    if len(hits) > 1:
        raise UnknownMessage(f"{ref!r} names several messages here; give more of the id.")
    return next(iter(hits.items()), None)


def reply_target(conn: sqlite3.Connection, ref: str) -> tuple[str, str]:
    """``(full id, thread key)`` of the message ``--reply-to`` names; UnknownMessage if none."""
    found = _by_prefix(conn, ref)
    if found is None:
        raise UnknownMessage(
            f"There is no message {ref!r} here to reply to; `crosstalk read --all` and "
            "`crosstalk sent` show ids."
        )
    msg_id, thread = found
    return msg_id, thread or msg_id


def thread_key(conn: sqlite3.Connection, ref: str) -> str:
    """The thread ``ref`` names: a known thread key as given, else a message's thread (or id)."""
    known = conn.execute(
        "SELECT 1 FROM held_messages WHERE json_extract(body, '$.thread') = ? "
        "UNION SELECT 1 FROM sent_messages WHERE thread = ? "
        "UNION SELECT 1 FROM threads WHERE thread = ?",
        (ref, ref, ref),
    ).fetchone()
    if known is not None:
        return ref
    found = _by_prefix(conn, ref)
    if found is None:
        raise UnknownMessage(f"There is no thread or message {ref!r} here.")
    msg_id, thread = found
    return thread or msg_id


def thread_view(conn: sqlite3.Connection, key: str, *, me: str) -> ThreadView:
    """The thread ``key``: its messages oldest first, and its closing, if any."""
    messages = [_held(row, me) for row in conn.execute(
        "SELECT h.message_id, h.sender, h.body, h.received_at, "
        "coalesce(c.label, (SELECT m.label FROM room_members m WHERE m.room_id = h.room_id "
        "AND m.fingerprint = h.sender)) FROM held_messages h "
        "LEFT JOIN contacts c ON c.fingerprint = h.sender "
        "WHERE json_extract(h.body, '$.thread') = ? OR h.message_id = ?",
        (key, to_db(key)),
    ).fetchall()]
    messages += [
        ThreadMessage(str(i), "me", to, kind, text or "", reply_to, float(ts))
        for i, to, kind, text, reply_to, ts in conn.execute(
            "SELECT msg_id, to_label, kind, text, reply_to, created_at FROM sent_messages "
            "WHERE thread = ? OR msg_id = ?",
            (key, key),
        ).fetchall()
    ]
    closed = conn.execute(
        "SELECT summary, closed_by FROM threads WHERE thread = ?", (key,)
    ).fetchone()
    return ThreadView(
        key, sorted(messages, key=lambda m: m.ts), closed is not None,
        closed[0] if closed else None, closed[1] if closed else None,
    )


def _held(row: tuple[Any, ...], me: str) -> ThreadMessage:
    msg_id, sender, body, received, label = row
    op: dict[str, Any] = json.loads(body)
    return ThreadMessage(
        from_db(msg_id), "me" if sender == me else str(label or sender), None,
        str(op.get("kind", "message")), str(op.get("text", "")), op.get("reply_to"),
        float(op.get("relay_ts", received)),
    )


def thread_rooms(conn: sqlite3.Connection, key: str) -> list[str]:
    """The relay rooms the thread's messages went through (where its participants are)."""
    rows = conn.execute(
        "SELECT room_id FROM held_messages WHERE (json_extract(body, '$.thread') = ? "
        "OR message_id = ?) AND room_id != 'local' "
        "UNION SELECT room_id FROM sent_messages WHERE thread = ? OR msg_id = ?",
        (key, to_db(key), key, key),
    ).fetchall()
    return sorted(str(r[0]) for r in rows)


def record_closing(
    conn: sqlite3.Connection, key: str, summary: str, by: str, now: float,
    room_id: str | None = None,
) -> None:
    """Record thread ``key`` closed by ``by`` with ``summary``; ``room_id``: the room the
    closing came through (search filters by it), None when the thread went through none."""
    conn.execute(
        "INSERT OR REPLACE INTO threads (thread, summary, closed_by, closed_at, room_id) "
        "VALUES (?, ?, ?, ?, ?)",
        (key, summary, by, now, room_id),
    )


def apply_closing(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a participant closed a thread; its summary is the message's text."""
    op = applied.op
    if isinstance(op, MessageOp) and op.closes_thread and op.thread:
        label = source_of(conn, applied.sender).label  # our name for them, not theirs
        record_closing(conn, op.thread, op.text, label, applied.relay_ts, applied.room_id)


def record_sent_summary(
    conn: sqlite3.Connection, msg_id: str, room_id: str, to_label: str, now: float, *,
    thread: str, summary: str,
) -> None:
    """Keep our side of a closing summary posted into ``room_id`` (``to_label``: its name).

    Written in the outbox commit that queues the summary, so once per op id (a second write
    of the same id changes nothing)."""
    conn.execute(
        "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, chars, created_at, "
        "thread, text) VALUES (?, ?, ?, 'message', ?, ?, ?, ?) "
        "ON CONFLICT (msg_id) DO NOTHING",
        (msg_id, room_id, to_label, len(summary), now, thread, summary),
    )
