"""Index the memory records noted in ``search_queue`` (schema_search_queue.py) for search.

Each call takes the first ``limit`` keys of the queue, in key order, and in the caller's
transaction: makes each record's search row as step 25 made it (``record_row``, the one
definition), compares it with the row the index holds, rewrites only the rows that differ (a
record gone or forgotten has none: its row is deleted), and takes the keys off the queue. So a
key noted twice is indexed once, and a snapshot that installs the same facts again costs a read
and a compare per fact instead of FTS5 tokenizing each one again.

Callers: the room actor, once a catch-up has applied everything there was (short transactions of
``limit`` keys, so a burst of ops waits at most one of them), and the ``search`` op, which
indexes what is left before it searches (crosstalk/features/search/ops.py).
"""

from __future__ import annotations

import sqlite3

from crosstalk.store.schema_search import record_row

#: Keys indexed per transaction: a record costs ~25-50 µs (FTS5 tokenizing it; more on a busy
#: machine), so a chunk holds the event loop for about 5-10 ms, as a catch-up batch does.
CHUNK = 200

_COLUMNS = "key, kind, ref, room_id, sender, label, ts, text, extra"
_UPTO = "(q.room_id, q.kind, q.record_id) <= (?, ?, ?)"
_KEY = "q.kind || ':' || q.room_id || ':' || q.record_id"


def _fresh_select() -> str:
    # record_row reads ``{row}.col`` and may end in a WHERE; the records come in by the queue.
    head, _sep, where = record_row("src").partition(" WHERE ")
    # CROSS JOIN keeps the queue outermost: left to itself the planner walks the room's records
    # (all of them, for a few keys queued) and makes each one's row before it looks it up there.
    return (
        f"{head} FROM search_queue q CROSS JOIN memory_records src ON src.room_id = q.room_id "
        f"AND src.kind = q.kind AND src.record_id = q.record_id WHERE {_UPTO} AND {where}"
    )


_FRESH = _fresh_select()
_HELD = (
    f"SELECT d.{_COLUMNS.replace(', ', ', d.')} FROM search_queue q "
    f"JOIN search_docs d ON d.key = {_KEY} WHERE {_UPTO}"
)


def unindexed(conn: sqlite3.Connection) -> bool:
    """Whether some memory record's change is not in the search index yet."""
    return conn.execute("SELECT 1 FROM search_queue LIMIT 1").fetchone() is not None


def index_records(conn: sqlite3.Connection, limit: int = CHUNK) -> int:
    """Index up to ``limit`` queued records in ``conn``'s transaction; how many were taken."""
    keys = conn.execute(
        "SELECT room_id, kind, record_id FROM search_queue "
        "ORDER BY room_id, kind, record_id LIMIT ?", (limit,)
    ).fetchall()
    if not keys:
        return 0
    last = tuple(keys[-1])
    fresh = {row[0]: tuple(row) for row in conn.execute(_FRESH, last)}
    held = {row[0]: tuple(row) for row in conn.execute(_HELD, last)}
    changed = [f"{kind}:{room}:{record}" for room, kind, record in keys]
    changed = [key for key in changed if fresh.get(key) != held.get(key)]
    conn.executemany("DELETE FROM search_docs WHERE key = ?", [(k,) for k in changed if k in held])
    conn.executemany(
        f"INSERT INTO search_docs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [fresh[k] for k in changed if k in fresh],
    )
    conn.execute(
        "DELETE FROM search_queue WHERE (room_id, kind, record_id) <= (?, ?, ?)", last
    )
    return len(keys)


def index_all(conn: sqlite3.Connection) -> None:
    """Index every queued record, in ``conn``'s one transaction (a search about to read)."""
    while index_records(conn):
        pass
