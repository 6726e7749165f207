"""The search index (migration step 25; queried by crosstalk/store/search.py).

Two tables. ``search_docs`` has one row per searchable item, whatever its source: a message held
for us, a message we sent, a fact, a task, a decision, a closed thread's summary. It keeps what
search shows and filters by (kind, id, room, sender, time) and the text it indexes: ``text`` (the
words) and ``extra`` (a message's slice labels, a fact's tags, a task's note, a decision's why).
``search_fts`` is an FTS5 index over those two columns with ``search_docs`` as its external
content (the text is stored once), ranked by bm25 with ``extra`` weighing less than ``text``, with
the Porter stemmer over unicode61 (``migrate`` finds *migrations*), and an index of 4-letter
prefixes for prefix queries.

Why triggers on the source tables, not writes in the store functions: a row reaches those
tables from many places (held by the messages applier, a local post, a decision's announcement,
rewritten by a refusal or an ended ask; memory records from the applier, a catch-up batch, an
installed snapshot; sent rows from a send, a closing summary, an early receipt), and leaves them
by retention, a snapshot install or a leave. A trigger is in every one of those transactions by
construction, including paths written after this one: a message is never held without its index
row, a rolled-back write leaves none, and a message pruned takes its row with it. Each trigger
deletes the item's row before inserting it again (an item re-held after a rejoin finds its old row
gone), never ``INSERT OR REPLACE``: a replace's implicit delete fires no trigger, so the FTS index
would keep the old text.

Since step 28 the memory records' triggers only note what changed, and their search rows are
made after the transaction (schema_search_queue.py); this step's other triggers stand.

Scope: only what arrived here is indexed, so a room we never joined has nothing in it. A room we
leave keeps its rows (``forget_room`` marks it ``left`` before it deletes the room's messages and
memory, and the delete triggers skip rooms marked ``left``): what we could read while in it
stays searchable; retention ages those messages out as it would have aged out the read messages
themselves (crosstalk/store/retention.py). Messages held for us that announce a decision are
not indexed: the decision itself is. Fact records that were forgotten leave the index.

Step 25 also gives ``threads`` the room a closing came through (a thread carries no room), so a
summary can be searched by room; rows closed before it take the room of the thread's messages.
"""

from __future__ import annotations

#: The kinds of item search knows, in the order ``--kind`` lists them.
KINDS = ("message", "fact", "task", "decision", "thread")
_COLUMNS = "key, kind, ref, room_id, sender, label, ts, text, extra"


def _json(row: str, path: str) -> str:
    """``json_extract`` that is NULL, not an error, on a body that is not JSON: the index must
    never stop a message from being held."""
    return f"CASE WHEN json_valid({row}.body) THEN json_extract({row}.body, '{path}') END"


def held_text(row: str) -> str:
    """The words a held message ``row`` is indexed by (also read by migration 27's view)."""
    return f"coalesce({_json(row, '$.text')}, '')"


def held_labels(row: str) -> str:
    """A held message's slice labels, its indexed ``extra`` (also read by migration 27's view)."""
    labels = (
        f"CASE WHEN json_valid({row}.body) THEN (SELECT group_concat("
        f"json_extract(s.value, '$.label'), ' ') FROM json_each({row}.body, '$.slices') s) END"
    )
    return f"coalesce({labels}, '')"


def held_row(row: str, text: str, extra: str) -> str:
    """The search row of held message ``row`` with ``text`` and ``extra`` as its words."""
    return (
        f"SELECT 'm:' || {row}.message_id, 'message', {row}.message_id, {row}.room_id, "
        f"{row}.sender, NULL, coalesce({_json(row, '$.relay_ts')}, {row}.received_at), "
        f"{text}, {extra} "
        f"WHERE coalesce({_json(row, '$.kind')}, 'message') != 'decision'"
    )


def _held(row: str) -> str:
    """The search row of held message ``row`` (``NEW`` in a trigger, an alias in a backfill)."""
    return held_row(row, held_text(row), held_labels(row))


def sent_row(row: str, text: str, extra: str) -> str:
    """The search row of a message we sent (``sender`` '' is us) with ``text`` and ``extra``
    as its words; none without text."""
    return (
        f"SELECT 's:' || {row}.msg_id, 'message', {row}.msg_id, {row}.room_id, '', NULL, "
        f"{row}.created_at, {text}, {extra} WHERE coalesce({row}.text, '') != ''"
    )


def _sent(row: str) -> str:
    """The search row of a message we sent, its text its words."""
    return sent_row(row, f"{row}.text", "''")


def record_row(row: str) -> str:
    """The search row of a fact, task or decision (canonical JSON in ``memory_records``); none
    for a forgotten fact. Also made by crosstalk/store/search_index.py since step 28."""
    who = (
        f"CASE {row}.kind WHEN 'fact' THEN '$.text_by' WHEN 'task' THEN '$.created_by' "
        "ELSE '$.by' END"
    )

    def person(field: str) -> str:
        return (
            f"CASE WHEN json_valid({row}.body) THEN "
            f"json_extract({row}.body, ({who}) || '.{field}') END"
        )

    tags = (
        f"CASE WHEN json_valid({row}.body) THEN (SELECT group_concat(t.value, ' ') "
        f"FROM json_each({row}.body, '$.tags') t) END"
    )
    ts = (
        f"CASE {row}.kind WHEN 'fact' THEN max(coalesce({_json(row, '$.added_at')}, 0), "
        f"coalesce({_json(row, '$.last_affirmed')}, 0)) "
        f"WHEN 'task' THEN {_json(row, '$.added_at')} ELSE {_json(row, '$.at')} END"
    )
    extra = (
        f"CASE {row}.kind WHEN 'fact' THEN {tags} WHEN 'task' THEN {_json(row, '$.note')} "
        f"ELSE {_json(row, '$.why')} END"
    )
    live = f"({row}.kind != 'fact' OR {_json(row, '$.forgotten')} IS NULL)"
    return (
        f"SELECT {row}.kind || ':' || {row}.room_id || ':' || {row}.record_id, {row}.kind, "
        f"{row}.record_id, {row}.room_id, {person('fingerprint')}, {person('label')}, "
        f"coalesce({ts}, 0), coalesce({_json(row, '$.text')}, ''), coalesce({extra}, '') "
        f"WHERE json_valid({row}.body) AND {live}"
    )


def _thread(row: str) -> str:
    """The search row of a closed thread: its summary, under the name of who closed it."""
    return (
        f"SELECT 't:' || {row}.thread, 'thread', {row}.thread, coalesce({row}.room_id, ''), "
        f"NULL, {row}.closed_by, {row}.closed_at, {row}.summary, ''"
    )


def _kept(row: str) -> str:
    """A trigger's condition for deleting the index row of a deleted source row: not while the
    room is being left (see the module docstring)."""
    return f"NOT EXISTS (SELECT 1 FROM rooms WHERE room_id = {row}.room_id AND state = 'left')"


def _sync(table: str, name: str, key: str, select: str, *, changed: str) -> tuple[str, ...]:
    """The insert, update and delete triggers that keep ``table``'s rows in ``search_docs``."""
    insert = f"INSERT INTO search_docs ({_COLUMNS}) {select}"
    return (
        f"CREATE TRIGGER search_{name}_ai AFTER INSERT ON {table} BEGIN "
        f"DELETE FROM search_docs WHERE key = {key.format(row='NEW')}; "
        f"{insert.format(row='NEW')}; END",
        f"CREATE TRIGGER search_{name}_au AFTER UPDATE OF {changed} ON {table} BEGIN "
        f"DELETE FROM search_docs WHERE key = {key.format(row='OLD')}; "
        f"{insert.format(row='NEW')}; END",
        f"CREATE TRIGGER search_{name}_ad AFTER DELETE ON {table} WHEN {_kept('OLD')} "
        f"BEGIN DELETE FROM search_docs WHERE key = {key.format(row='OLD')}; END",
    )


_SOURCES = (
    # (table, trigger name, the row's key, its search row, the columns whose change re-indexes)
    ("held_messages", "held", "'m:' || {row}.message_id", _held("{row}"), "body"),
    ("sent_messages", "sent", "'s:' || {row}.msg_id", _sent("{row}"), "text, room_id, created_at"),
    ("memory_records", "record",
     "{row}.kind || ':' || {row}.room_id || ':' || {row}.record_id", record_row("{row}"), "body"),
    ("threads", "thread", "'t:' || {row}.thread", _thread("{row}"),
     "summary, closed_by, closed_at, room_id"),
)


def _backfill(table: str, select: str) -> str:
    """Index the rows already in ``table`` (the history before this step)."""
    # The search rows read ``{row}.col``; a backfill reads the table under the alias ``src``.
    # FROM goes before the select's WHERE (if any).
    body = select.format(row="src")
    head, sep, where = body.partition(" WHERE ")
    return f"INSERT INTO search_docs ({_COLUMNS}) {head} FROM {table} AS src {sep}{where}"


STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE threads ADD COLUMN room_id TEXT",
    # The room of each thread closed before this step: one of ours sent in it, else its root.
    "UPDATE threads SET room_id = coalesce("
    "(SELECT s.room_id FROM sent_messages s WHERE s.thread = threads.thread "
    "AND s.room_id != 'local' LIMIT 1), "
    "(SELECT h.room_id FROM held_messages h WHERE h.message_id = threads.thread), "
    "(SELECT h.room_id FROM held_messages h WHERE CASE WHEN json_valid(h.body) THEN "
    "json_extract(h.body, '$.thread') END = threads.thread LIMIT 1))",
    f"""CREATE TABLE search_docs (
        id INTEGER PRIMARY KEY,
        key TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ({", ".join(f"'{k}'" for k in KINDS)})),
        ref TEXT NOT NULL,
        room_id TEXT NOT NULL,
        sender TEXT,
        label TEXT,
        ts REAL NOT NULL,
        text TEXT NOT NULL,
        extra TEXT NOT NULL
    )""",
    # A left room's messages age out by time (retention); --room filters by room.
    "CREATE INDEX search_docs_by_room ON search_docs (room_id, kind, ts)",
    # prefix='4': `migr*` reads one list of its own instead of merging the list of every word
    # starting so (60 ms to 10 over 100,000 messages). Four letters only: each length indexed
    # costs every message held a fifth more, and 3 to 5 cost it a third (bench/search.py).
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, extra, content='search_docs', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2', prefix='4')",
    # `ORDER BY rank` is bm25 with the words weighing more than labels, tags and notes.
    "INSERT INTO search_fts (search_fts, rank) VALUES ('rank', 'bm25(1.0, 0.4)')",
    *(_backfill(table, select) for table, _n, _k, select, _c in _SOURCES),
    "INSERT INTO search_fts (search_fts) VALUES ('rebuild')",
    # From here on the FTS index follows search_docs row for row (FTS5's external content
    # pattern: a delete must hand FTS5 the old text exactly as it was indexed).
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts (rowid, text, extra) VALUES (NEW.id, NEW.text, NEW.extra); END",
    "CREATE TRIGGER search_docs_ad AFTER DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts (search_fts, rowid, text, extra) "
    "VALUES ('delete', OLD.id, OLD.text, OLD.extra); END",
    "CREATE TRIGGER search_docs_au AFTER UPDATE ON search_docs BEGIN "
    "INSERT INTO search_fts (search_fts, rowid, text, extra) "
    "VALUES ('delete', OLD.id, OLD.text, OLD.extra); "
    "INSERT INTO search_fts (rowid, text, extra) VALUES (NEW.id, NEW.text, NEW.extra); END",
    *(stmt for table, name, key, select, changed in _SOURCES
      for stmt in _sync(table, name, key, select, changed=changed)),
)
