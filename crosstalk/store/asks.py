"""The receiver's side of an ask that ended without an answer (issue 19 item 3).

Theory of operation
-------------------
Only the asker knows when an ask ends unanswered: its ``ask`` timed out, or its client hung up
(Ctrl-C, an MCP call cancelled). The receiver cannot tell a cancel from a slow asker, so a
timeout rule of its own would be wrong in both directions; instead the asker's daemon posts
:class:`~crosstalk.wire.room_ops.AskEnded` into the room the ask went to, sealed like every op
(the relay learns nothing but that an op was posted). The receiver's applier, in the room's
transaction, marks the held ask ended and withdraws the gate's notices about it; the gate checks
the mark when it decides, so an ``AskEnded`` applied in the same batch as its ask (both arrived
while we were away) still leaves no notice behind. The ask stays readable; only its notice goes.
An ``AskEnded`` names an ask by correlation and counts only when its verified sender is the
sender of that ask.
"""

from __future__ import annotations

import sqlite3
import time

from crosstalk.core.room import Applied
from crosstalk.store.ids import from_db, to_db
from crosstalk.wire.room_ops import AskEnded

ENDED_KEY = "ask_ended"
"""Set in a held ask's body once its asker stopped waiting."""


def apply_ask_ended(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: mark the sender's ask ended and withdraw the notices about it."""
    op = applied.op
    if not isinstance(op, AskEnded):
        return
    rows = conn.execute(
        "SELECT message_id FROM held_messages WHERE room_id = ? AND sender = ? "
        "AND json_extract(body, '$.kind') = 'ask' AND json_extract(body, '$.correlation') = ?",
        (applied.room_id, applied.sender, op.correlation),
    ).fetchall()
    now = time.time()
    for (stored_id,) in rows:
        conn.execute(
            f"UPDATE held_messages SET body = json_set(body, '$.{ENDED_KEY}', json('true')) "
            "WHERE message_id = ?",
            (stored_id,),
        )
        withdraw_if_ended(conn, from_db(stored_id), now)


def withdraw_if_ended(conn: sqlite3.Connection, message_id: str, now: float) -> None:
    """Withdraw the notices about ``message_id`` if it is an ask whose asker stopped waiting."""
    conn.execute(
        "UPDATE notices SET withdrawn_at = ? WHERE message_id = ? AND withdrawn_at IS NULL "
        f"AND EXISTS (SELECT 1 FROM held_messages WHERE message_id = ? "
        f"AND json_extract(body, '$.{ENDED_KEY}'))",
        (now, to_db(message_id), to_db(message_id)),
    )
