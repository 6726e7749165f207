"""The page's SQL: a room's conversation in order, what we sent (our own words), claim history.

The relay never echoes our own ops back, so the page keeps the op of each message we send
(written in the transaction that queues it; see :func:`record_sent`). Since migration 27 a message
``send`` recorded keeps it on its ``sent_messages`` row (``words``: the op without what the row
already holds), so its words are kept once; the page's own table ``ui_sent_words`` (migration 12,
``crosstalk/store/schema_ui.py``) keeps the ops that have no such row, those ``sent`` does not
list (an automatic refusal, a decision's announcement, an ask's note).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from crosstalk.store.ids import from_db
from crosstalk.store.messages import body_json, delivery_state
from crosstalk.wire.control.replies.daemon import ClaimEvent, ConversationEntry, SliceRef

#: A room's conversation shows at most this many of the latest messages.
MAX_MESSAGES = 2000


#: What a ``sent_messages`` row holds of the op under the same name: left out of its ``words``.
_ON_THE_ROW = ("text", "kind", "thread", "reply_to")


def record_sent(
    conn: sqlite3.Connection, *, msg_id: str, room_id: str, body: dict[str, Any], now: float
) -> None:
    """Keep the words of a message we sent (once per id).

    On the message's ``sent_messages`` row, written earlier in this transaction, when it agrees
    with the op on the fields it holds (:data:`_ON_THE_ROW`): the op without those (and without
    ``sent_at``, the row's ``created_at``), so a message's words are not kept twice (issue 41).
    Else in ``ui_sent_words``, whole."""
    row = conn.execute(
        f"SELECT {', '.join(_ON_THE_ROW)} FROM sent_messages WHERE msg_id = ? AND room_id = ?",
        (msg_id, room_id),
    ).fetchone()
    if row is not None and all(body.get(k) == v for k, v in zip(_ON_THE_ROW, row, strict=True)):
        words = {k: v for k, v in body.items() if k not in (*_ON_THE_ROW, "sent_at")}
        conn.execute(
            "UPDATE sent_messages SET words = ? WHERE msg_id = ? AND words IS NULL",
            (body_json(words), msg_id),
        )
        return
    conn.execute(
        "INSERT OR IGNORE INTO ui_sent_words (msg_id, room_id, body, created_at) "
        "VALUES (?, ?, ?, ?)",
        (msg_id, room_id, body_json(body), now),
    )


def _slices(body: dict[str, Any]) -> list[SliceRef]:
    return [
        SliceRef(i, str(s.get("kind", "")), str(s.get("label", "")),
                 len(str(s.get("content", "")).encode()))
        for i, s in enumerate(body.get("slices") or [])
        if isinstance(s, dict)
    ]


def _entry(msg_id: str, mine: bool, sender: str, body: dict[str, Any], ts: float,
           state: str, reason: str | None) -> ConversationEntry:
    def opt(key: str) -> str | None:
        value = body.get(key)
        return None if value is None else str(value)

    return ConversationEntry(
        id=msg_id, mine=mine, sender=sender, from_label=str(body.get("from_label", "")),
        from_session=opt("from_session"), text=str(body.get("text", "")),
        intent=str(body.get("intent", "fyi")), kind=str(body.get("kind", "message")),
        thread=opt("thread"), reply_to=opt("reply_to"), correlation=opt("correlation"),
        ts=ts, slices=_slices(body), state=state, reason=reason,
    )


def conversation(conn: sqlite3.Connection, room_id: str, me: str) -> list[ConversationEntry]:
    """Every message in ``room_id`` we hold or sent, oldest first (the latest MAX_MESSAGES)."""
    entries: list[ConversationEntry] = []
    for msg_id, sender, body, received, read_at in conn.execute(
        "SELECT message_id, sender, body, received_at, read_at FROM held_messages "
        "WHERE room_id = ? ORDER BY received_at DESC LIMIT ?", (room_id, MAX_MESSAGES)
    ):
        data = _loads(body)
        ts = float(data.get("relay_ts") or received)
        state = "read" if read_at is not None else "unread"
        entries.append(_entry(from_db(msg_id), False, sender, data, ts, state, None))
    for msg_id, body, created, *held in conn.execute(_SENT, (room_id, MAX_MESSAGES) * 2):
        state, reason = delivery_state(conn, msg_id)
        data = _loads(body)
        for key, value in zip(_ON_THE_ROW, held, strict=True):
            if key not in data and value is not None:  # kept once, on sent_messages
                data[key] = value
        entries.append(_entry(msg_id, True, me, data, float(created), state, reason))
    entries.sort(key=lambda e: (e.ts, e.id))
    return entries[-MAX_MESSAGES:]


#: A room's messages we sent, with their words: on their ``sent_messages`` rows, then the ops
#: kept whole in ``ui_sent_words`` (before migration 27, without the text the row holds).
_SENT = (
    f"SELECT * FROM (SELECT msg_id, words, created_at, {', '.join(_ON_THE_ROW)} "
    "FROM sent_messages WHERE room_id = ? AND words IS NOT NULL "
    "ORDER BY created_at DESC LIMIT ?) UNION ALL "
    f"SELECT * FROM (SELECT w.msg_id, w.body, w.created_at, "
    f"{', '.join(f's.{k}' for k in _ON_THE_ROW)} FROM ui_sent_words w "
    "LEFT JOIN sent_messages s ON s.msg_id = w.msg_id WHERE w.room_id = ? "
    "ORDER BY w.created_at DESC LIMIT ?)"
)
#: The ids of a room's messages we sent, as the page shows them.
_SENT_IDS = (
    "SELECT msg_id FROM sent_messages WHERE room_id = :room AND words IS NOT NULL "
    "UNION ALL SELECT msg_id FROM ui_sent_words WHERE room_id = :room"
)


def room_ids(conn: sqlite3.Connection) -> list[str]:
    """Every room we hold, joined or not (the page marks each)."""
    return [str(r[0]) for r in conn.execute("SELECT room_id FROM rooms")]


def room_marks(conn: sqlite3.Connection, room_ids: list[str]) -> dict[str, str]:
    """A short digest per room that changes whenever its conversation view would."""
    marks: dict[str, str] = {}
    for room_id in room_ids:
        held = conn.execute(
            "SELECT count(*), max(received_at), count(read_at) FROM held_messages "
            "WHERE room_id = ?", (room_id,)
        ).fetchone()
        sent = conn.execute(
            "SELECT count(*), group_concat(coalesce(s.receipt, '') || coalesce(s.seq, '') "
            "|| coalesce(o.state, '') "
            f"|| coalesce(r.code, '') || coalesce(s.refusal, ''), ',') FROM ({_SENT_IDS}) w "
            "LEFT JOIN sent_messages s ON s.msg_id = w.msg_id "
            "LEFT JOIN outbox o ON o.op_id = w.msg_id "
            "LEFT JOIN refused_ops r ON r.op_id = w.msg_id", {"room": room_id}
        ).fetchone()
        raw = json.dumps([list(held), list(sent or [])], default=str).encode()
        marks[room_id] = hashlib.sha256(raw).hexdigest()[:16]
    return marks


def claim_history(conn: sqlite3.Connection, room_id: str) -> list[ClaimEvent]:
    """Every claim's outcome in the room, in the room's order (who won, who lost to whom)."""
    events = []
    for (body,) in conn.execute(
        "SELECT body FROM memory_outcomes WHERE room_id = ? ORDER BY seq, op_id", (room_id,)
    ):
        data = _loads(body)
        if data.get("code") in ("won", "lost"):
            winner = data.get("winner")
            holder = str(winner.get("label")) if isinstance(winner, dict) else None
            events.append(ClaimEvent(int(data.get("seq", 0)), str(data["code"]), holder))
    return events


def _loads(body: str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}
