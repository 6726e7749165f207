"""The decisions feature's SQL: hold an announcement, list the decisions of some rooms."""

from __future__ import annotations

import json
import sqlite3
import time

from crosstalk.core.room import Applied
from crosstalk.store.ids import to_db
from crosstalk.store.memory import load_state
from crosstalk.store.rooms import Room
from crosstalk.store.schema_compact import NEXT_HELD_ROWID
from crosstalk.wire.control.replies.memory import DecisionView
from crosstalk.wire.converter import unstructure
from crosstalk.wire.room_ops import MessageOp


def hold_announcement(conn: sqlite3.Connection, applied: Applied, op: MessageOp) -> None:
    """Hold ``op``, the announcement of the decision ``applied``, for our sessions (once, by op
    id)."""
    body = json.dumps({**unstructure(op), "relay_ts": applied.relay_ts}, sort_keys=True)
    conn.execute(
        "INSERT OR IGNORE INTO held_messages (rowid, message_id, room_id, sender, "
        "target_session, target_project, intent, body, received_at) "
        f"VALUES ({NEXT_HELD_ROWID}, ?, ?, ?, NULL, NULL, ?, ?, ?)",
        (to_db(applied.op_id), applied.room_id, applied.sender, op.intent.value, body,
         time.time()),
    )


def list_decisions(
    conn: sqlite3.Connection, rooms: list[Room], names: dict[str, str]
) -> list[DecisionView]:
    """Every decision of ``rooms``, oldest first (by when it was decided)."""
    views = [
        DecisionView(
            d.decision_id, d.text, d.why, names.get(d.by.fingerprint, d.by.label), room.name,
            d.at, d.repo,
        )
        for room in rooms
        for d in load_state(conn, room.room_id).decisions()
    ]
    return sorted(views, key=lambda d: d.ts)
