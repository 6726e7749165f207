"""What ``prune`` deletes: finished rows older than a cutoff, a bounded number per call.

Only finished work goes, never anything still owed to someone:

* ``held_messages`` read before the cutoff (an unread message stays however old it is);
* ``notices`` made before the cutoff whose message is read or gone (an unread one's notice
  stays: it may still surface);
* the ``attention_record``, ``ration_stamps`` and ``refused_ops`` entries before the cutoff;
* ``relay_inbound`` rows received before the cutoff that the room actor applied and room memory
  passed (the relay resumes after our cursor, so none comes again), but never a room's newest
  row: :func:`crosstalk.store.reservations.relay_now` reads the relay's clock from it;
* ``outbox`` posts the relay sequenced before the cutoff, that room memory passed and whose
  outcome nobody still waits to report (no ``memory_sent`` row). ``sent`` does not need them:
  the link writes a message's seq on its ``sent_messages`` row when the relay sequences it;
* agent ``sessions`` not seen since the cutoff;
* the search index's copies of messages held in a room we left (the messages went with the
  leave; their index rows stay searchable only as long as a read message would have stayed).

Sent messages (our side of threads, ``cost``) and room memory stay. Each call deletes at most
``limit`` rows per table, so a first prune of a large store is several short transactions
rather than one long one that would hold up the daemon's writes.

:func:`trim` applies only the two rules about the relay link's copies (``outbox`` and
``relay_inbound``) with a cutoff of moments ago, not days: once sequenced, applied and passed by
room memory, a sealed op is kept nowhere else's behalf, and keeping it a month cost a busy
identity about 1 GB a day (issue 41). The daemon trims every few heartbeats
(crosstalk/features/retention/ops.py), so these tables hold what is in flight, not history.
Room memory passes our own posts when the room's next op arrives (or one of our memory ops is
sequenced), so a room's last few posts of ours wait for that before they go.
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
        "WHERE i.received_at < :cutoff AND i.seq < "
        "(SELECT max(n.seq) FROM relay_inbound n WHERE n.room_id = i.room_id)"
    ),
    "outbox": (
        "SELECT o.id FROM outbox o "
        "JOIN memory_rooms m ON m.room_id = o.room_id AND o.seq <= m.last_seq "
        "WHERE o.created_at < :cutoff AND o.state = 'sent' AND NOT EXISTS "
        "(SELECT 1 FROM memory_sent s WHERE s.op_id = o.op_id)"
    ),
    "sessions": "SELECT rowid FROM sessions WHERE last_seen < :cutoff",
    # Marked `gone` when a left room's held message went (migration 26, store/schema_disk.py).
    "search_docs": "SELECT id FROM search_docs WHERE gone = 1 AND ts < :cutoff",
}
_KEYS = {"notices": "id", "attention_record": "id", "outbox": "id", "search_docs": "id"}


#: The link's copies of sealed ops, which :func:`trim` removes moments after they are done.
LINK_COPIES = ("relay_inbound", "outbox")


def prune(conn: sqlite3.Connection, cutoff: float, limit: int = LIMIT) -> dict[str, int]:
    """Delete up to ``limit`` finished rows per table from before ``cutoff`` (wall-clock
    seconds); how many went from each table. Call again while any count equals ``limit``."""
    return _delete(conn, _RULES, cutoff, limit)


def trim(conn: sqlite3.Connection, cutoff: float, limit: int = LIMIT) -> dict[str, int]:
    """Delete up to ``limit`` of the link's finished copies (:data:`LINK_COPIES`) from before
    ``cutoff`` per table; how many went. ``cutoff`` is moments ago: a short grace for anyone
    who looks a post up right after it was sequenced (``post_state`` also reads
    ``sent_messages``, so a message's ``sent`` survives its row)."""
    return _delete(conn, {t: _RULES[t] for t in LINK_COPIES}, cutoff, limit)


def _delete(
    conn: sqlite3.Connection, rules: dict[str, str], cutoff: float, limit: int
) -> dict[str, int]:
    removed = {}
    for table, rows in rules.items():
        key = _KEYS.get(table, "rowid")
        removed[table] = conn.execute(
            f"DELETE FROM {table} WHERE {key} IN ({rows} LIMIT :limit)",
            {"cutoff": cutoff, "limit": limit},
        ).rowcount
    return removed


def more_to_do(removed: dict[str, int], limit: int = LIMIT) -> bool:
    """Whether a :func:`prune` call stopped at its limit somewhere."""
    return any(count >= limit for count in removed.values())
