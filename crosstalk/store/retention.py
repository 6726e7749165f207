"""What ``prune`` deletes: finished rows older than a cutoff, a bounded number per call.

Only finished work goes, never anything still owed to someone:

* ``held_messages`` read before the cutoff (an unread message stays however old it is);
* ``notices`` made before the cutoff whose message is read or gone (an unread one's notice
  stays: it may still surface);
* the ``attention_record``, ``ration_stamps`` and ``refused_ops`` entries before the cutoff;
* ``relay_inbound`` rows received before the cutoff that the room actor applied and room memory
  passed (the relay resumes after our cursor, so none comes again);
* ``outbox`` posts the relay sequenced before the cutoff, that room memory passed, and whose
  message (if it is one) has a delivery receipt, so ``sent`` still says ``delivered``/``read``;
* agent ``sessions`` not seen since the cutoff;
* the search index's copies of messages held in a room we left (the messages went with the
  leave; their index rows stay searchable only as long as a read message would have stayed).

Sent messages (our side of threads, ``cost``) and room memory stay. Each call deletes at most
``limit`` rows per table, so a first prune of a large store is several short transactions
rather than one long one that would hold up the daemon's writes.
"""

from __future__ import annotations

import sqlite3

#: Days a finished row is kept when nobody says otherwise (``crosstalk prune`` and the daemon).
DEFAULT_DAYS = 30.0
#: Rows deleted per table per transaction.
LIMIT = 2000

_RULES: dict[str, str] = {
    "held_messages": "SELECT rowid FROM held_messages WHERE read_at < :cutoff",
    "notices": (
        "SELECT id FROM notices WHERE created_at < :cutoff AND NOT EXISTS "
        "(SELECT 1 FROM held_messages h WHERE h.message_id = notices.message_id "
        "AND h.read_at IS NULL)"
    ),
    "attention_record": "SELECT id FROM attention_record WHERE ts < :cutoff",
    "ration_stamps": "SELECT rowid FROM ration_stamps WHERE sent_at < :cutoff",
    "refused_ops": "SELECT rowid FROM refused_ops WHERE refused_at < :cutoff",
    "relay_inbound": (
        "SELECT i.rowid FROM relay_inbound i "
        "JOIN room_cursors c ON c.room_id = i.room_id AND i.seq <= c.seq "
        "JOIN memory_rooms m ON m.room_id = i.room_id AND i.seq <= m.last_seq "
        "WHERE i.received_at < :cutoff"
    ),
    "outbox": (
        "SELECT o.id FROM outbox o "
        "JOIN memory_rooms m ON m.room_id = o.room_id AND o.seq <= m.last_seq "
        "WHERE o.created_at < :cutoff AND o.state = 'sent' AND NOT EXISTS "
        "(SELECT 1 FROM sent_messages s WHERE s.msg_id = o.op_id AND s.receipt IS NULL)"
    ),
    "sessions": "SELECT rowid FROM sessions WHERE last_seen < :cutoff",
    "search_docs": (
        # CROSS JOIN: the few rooms outside, the index by room inside (SQLite keeps the order).
        "SELECT d.id FROM rooms r CROSS JOIN search_docs d ON d.room_id = r.room_id "
        "AND d.kind = 'message' AND d.ts < :cutoff "
        "WHERE r.state = 'left' AND substr(d.key, 1, 2) = 'm:'"
    ),
}
_KEYS = {"notices": "id", "attention_record": "id", "outbox": "id", "search_docs": "id"}


def prune(conn: sqlite3.Connection, cutoff: float, limit: int = LIMIT) -> dict[str, int]:
    """Delete up to ``limit`` finished rows per table from before ``cutoff`` (wall-clock
    seconds); how many went from each table. Call again while any count equals ``limit``."""
    removed = {}
    for table, rows in _RULES.items():
        key = _KEYS.get(table, "rowid")
        removed[table] = conn.execute(
            f"DELETE FROM {table} WHERE {key} IN ({rows} LIMIT :limit)",
            {"cutoff": cutoff, "limit": limit},
        ).rowcount
    return removed


def more_to_do(removed: dict[str, int], limit: int = LIMIT) -> bool:
    """Whether a :func:`prune` call stopped at its limit somewhere."""
    return any(count >= limit for count in removed.values())
