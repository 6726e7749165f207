"""Memory records indexed for search after their transaction (migration step 28; issue 41).

Until this step the triggers on ``memory_records`` wrote each record's search row (and so its
FTS5 entry: tokenizing the text with its prefix index, parsing the JSON body several times) in
the transaction that wrote the record: a room's catch-up batch or a snapshot install paid about
28 µs a record there, a third of what a catch-up costs beyond opening (docs/performance.md).

Now those triggers only note which records changed, in ``search_queue`` (room, kind, record id:
one small row, whatever the change), and crosstalk/store/search_index.py makes their search rows
later, in short transactions of their own: the room actor once a catch-up has applied
everything there was, and the ``search`` op before it searches, so a search sees every record
committed before it began. A record changed twice before it is indexed is indexed once; one whose
search row would come out the same (a snapshot re-installing the same facts) is not re-indexed.

Still a trigger, not writes in crosstalk/store/memory.py, for schema_search.py's reason: a
record is noted in every transaction that changes it, whatever the path, and a rolled-back write
notes nothing. What a queued key means is read when it is indexed: the record as it is then
(indexed, or its row deleted when the record is gone or forgotten).

Leaving a room keeps what was searchable in it (schema_search.py): ``forget_room`` marks the room
``left`` and deletes its memory, whose delete triggers then note nothing (the search rows stay);
a record still queued at that moment is indexed right there from the row being deleted, or what
it last said would be lost with it.
"""

from __future__ import annotations

from crosstalk.store.schema_search import record_row

_KEY = "{row}.room_id = search_queue.room_id AND {row}.kind = search_queue.kind " \
       "AND {row}.record_id = search_queue.record_id"
_LEFT = "EXISTS (SELECT 1 FROM rooms WHERE room_id = OLD.room_id AND state = 'left')"
_QUEUED = f"EXISTS (SELECT 1 FROM search_queue WHERE {_KEY.format(row='OLD')})"
_COLUMNS = "key, kind, ref, room_id, sender, label, ts, text, extra"


def _note(row: str) -> str:
    # Not INSERT OR IGNORE: the conflict policy of the statement that fires a trigger overrides
    # the trigger's own, and memory.py writes records with an upsert (ABORT on conflict here).
    return (
        "INSERT INTO search_queue (room_id, kind, record_id) "
        f"SELECT {row}.room_id, {row}.kind, {row}.record_id "
        f"WHERE NOT EXISTS (SELECT 1 FROM search_queue WHERE {_KEY.format(row=row)})"
    )


STATEMENTS: tuple[str, ...] = (
    # Step 25's triggers (schema_search.py), which indexed in the writing transaction.
    *(f"DROP TRIGGER search_record_{event}" for event in ("ai", "au", "ad")),
    # Keys only: a record's words are read from memory_records when it is indexed.
    """CREATE TABLE search_queue (
        room_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        record_id TEXT NOT NULL,
        PRIMARY KEY (room_id, kind, record_id)
    ) WITHOUT ROWID""",
    f"CREATE TRIGGER search_record_noted_ai AFTER INSERT ON memory_records BEGIN "
    f"{_note('NEW')}; END",
    f"CREATE TRIGGER search_record_noted_au AFTER UPDATE OF body ON memory_records BEGIN "
    f"{_note('NEW')}; END",
    f"CREATE TRIGGER search_record_noted_ad AFTER DELETE ON memory_records WHEN NOT {_LEFT} "
    f"BEGIN {_note('OLD')}; END",
    # A room being left: a record not indexed yet is indexed now, as it last was.
    f"CREATE TRIGGER search_record_left_bd BEFORE DELETE ON memory_records "
    f"WHEN {_LEFT} AND {_QUEUED} BEGIN "
    f"DELETE FROM search_queue WHERE {_KEY.format(row='OLD')}; "
    "DELETE FROM search_docs WHERE key = OLD.kind || ':' || OLD.room_id || ':' || OLD.record_id; "
    f"INSERT INTO search_docs ({_COLUMNS}) {record_row('OLD')}; END",
)
