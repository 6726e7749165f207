"""Less disk per message at the recipient, third pass (migration step 29; issue 41, item 4).

**A held message is its own search row.** Since step 27 a held message's ``search_docs`` row kept
no words (FTS5 read them from the message through the view ``search_text``), yet it still copied
the message's id (twice: ``key`` and ``ref``), room, sender and time, with an entry in the unique
index of ``key``: about 220 bytes a message. Now a held message has no ``search_docs`` row: its
FTS5 entry's rowid is the message's own rowid, and ``search_text`` reads held messages by rowid
beside the rows of ``search_docs`` (sent messages, facts, tasks, decisions, closed threads, a
left room's kept messages). crosstalk/store/search.py reads kind, id, room, sender and time from
whichever of the two the rowid names. Results and snippets are as before.

One rowid space for two tables: ``search_docs`` ids and held messages' rowids must never meet.
Both come from one counter, ``search_docs``' AUTOINCREMENT sequence (``sqlite_sequence``): a
``search_docs`` row takes the next id above it (AUTOINCREMENT never goes below it, even once the
table is empty), and a held message is inserted with the next id too (:data:`NEXT_HELD_ROWID`),
its trigger moving the counter past it. So the rowids still follow the order things arrived
in, which the search's window of newest matches relies on, and ``watch``'s cursors (held
rowids) still grow. A hold that took a rowid a search row has is refused (``RAISE``): it would
give two items one index entry. This step renumbers the search rows it keeps above every held
message (the held rowids are cursors clients hold, so they stay): for the history from before
it, the search's window of newest matches takes what we sent and room memory as newer than
every message held then (a window only: what is in it is ranked by bm25 as before), and
everything after the step is in arrival order again. A held rowid must stay what it was made,
as ``watch``'s cursors already needed: nothing in crosstalk runs ``VACUUM`` (SQLite 3.40's
keeps implicit rowids, though its documentation allows a ``VACUUM`` to renumber a table
without an INTEGER PRIMARY KEY; the backup copies pages).

The triggers on ``held_messages`` follow step 27's rule (schema_lean.py): an index entry is
deleted BEFORE its message is rewritten or deleted, while ``search_text`` can still read the
words it was made from; a left room's message that goes leaves a ``search_docs`` row with its
own copy of everything (``gone``), as before. Rebuilding ``search_docs`` (for AUTOINCREMENT)
keeps the triggers of the other tables that write it: they name it, and with
``legacy_alter_table`` the rename checks no trigger against a table that is being replaced.

**Message ids as blobs.** ``held_messages.message_id``, ``notices.message_id`` and
``attention_record.item`` keep a 32-hex-digit id as its 16 bytes (crosstalk/store/ids.py, which
every function of the store converts through): this step converts the stored ones with the SQL
function crosstalk/store/migrations.py registers, since SQLite 3.40 has no ``unhex``. The
search triggers key a left room's kept row by the id's text (``'m:'`` and the hex digits).
"""

from __future__ import annotations

from crosstalk.store.ids import SQL_FUNCTION, sql_text
from crosstalk.store.schema_search import held_text

#: The rowid a held message is inserted with (crosstalk/store/messages.py ``hold``, the
#: decision announcement): the counter's next, and above every held message (what SQLite
#: would pick; all there is before this step).
NEXT_HELD_ROWID = (
    "(SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'search_docs'), 0), "
    "coalesce((SELECT max(rowid) FROM held_messages), 0)) + 1)"
)

#: Where a held message's slice labels come from without ``json_each``: FTS5 reads its content
#: with virtual tables barred (schema_lean.py), so the view walks ``$.slices`` by index. The
#: words are the same as schema_search.py's ``held_labels`` (the labels, in order, space-joined).
_LABELS = (
    "coalesce(CASE WHEN json_valid(h.body) THEN (WITH RECURSIVE s (i) AS (SELECT 0 UNION ALL "
    "SELECT i + 1 FROM s WHERE json_type(h.body, '$.slices[' || (i + 1) || ']') IS NOT NULL) "
    "SELECT group_concat(json_extract(h.body, '$.slices[' || i || '].label'), ' ') FROM s "
    "WHERE json_type(h.body, '$.slices[' || i || ']') IS NOT NULL) END, '')"
)


def held_ts(row: str) -> str:
    """A held message's time as search shows and filters it: the relay's, else its arrival."""
    return (
        f"coalesce(CASE WHEN json_valid({row}.body) THEN json_extract({row}.body, '$.relay_ts') "
        f"END, {row}.received_at)"
    )


def _indexed(row: str) -> str:
    """Whether held message ``row`` is searchable: one announcing a decision is not."""
    return (
        f"coalesce(CASE WHEN json_valid({row}.body) THEN json_extract({row}.body, '$.kind') END, "
        "'message') != 'decision'"
    )


_VIEW = (
    "CREATE VIEW search_text (id, text, extra) AS "
    f"SELECT h.rowid, {held_text('h')}, {_LABELS} FROM held_messages h WHERE {_indexed('h')} "
    "UNION ALL SELECT d.id, coalesce(d.text, "
    "(SELECT s.text FROM sent_messages s WHERE s.msg_id = d.ref)), d.extra FROM search_docs d"
)

_KEPT_IF_LEFT = "EXISTS (SELECT 1 FROM rooms WHERE room_id = OLD.room_id AND state = 'left')"


def _index(row: str) -> str:
    return (f"INSERT INTO search_fts (rowid, text, extra) "
            f"SELECT id, text, extra FROM search_text WHERE id = {row}")


def _unindex(row: str) -> str:
    return ("INSERT INTO search_fts (search_fts, rowid, text, extra) "
            f"SELECT 'delete', id, text, extra FROM search_text WHERE id = {row}")


_HELD_TRIGGERS = (
    "CREATE TRIGGER search_held_ai AFTER INSERT ON held_messages BEGIN "
    "SELECT RAISE(ABORT, 'held_messages: rowid taken by a search row (hold with "
    "crosstalk.store.schema_compact.NEXT_HELD_ROWID)') "
    "WHERE EXISTS (SELECT 1 FROM search_docs WHERE id = NEW.rowid); "
    # A left room's kept copy gives way to the message held again (a rejoin).
    f"DELETE FROM search_docs WHERE key = 'm:' || {sql_text('NEW.message_id')}; "
    "UPDATE sqlite_sequence SET seq = NEW.rowid WHERE name = 'search_docs' AND seq < NEW.rowid; "
    f"{_index('NEW.rowid')}; END",
    "CREATE TRIGGER search_held_bu BEFORE UPDATE OF body ON held_messages BEGIN "
    f"{_unindex('OLD.rowid')}; END",
    "CREATE TRIGGER search_held_au AFTER UPDATE OF body ON held_messages BEGIN "
    f"{_index('NEW.rowid')}; END",
    f"CREATE TRIGGER search_held_bd BEFORE DELETE ON held_messages WHEN NOT {_KEPT_IF_LEFT} "
    f"BEGIN {_unindex('OLD.rowid')}; END",
    # A left room's message goes, its search row stays: a search_docs row with its own copy
    # (indexed under its new id by search_docs_ai), then the message's entry goes.
    f"CREATE TRIGGER search_held_kept BEFORE DELETE ON held_messages WHEN {_KEPT_IF_LEFT} "
    "BEGIN INSERT INTO search_docs (key, kind, ref, room_id, sender, label, ts, text, extra, "
    f"gone) SELECT 'm:' || {sql_text('OLD.message_id')}, 'message', {sql_text('OLD.message_id')}, "
    f"OLD.room_id, OLD.sender, NULL, {held_ts('OLD')}, t.text, t.extra, 1 "
    "FROM search_text t WHERE t.id = OLD.rowid; "
    f"{_unindex('OLD.rowid')}; END",
)

_COLUMNS = "key, kind, ref, room_id, sender, label, ts, text, extra, gone"

STATEMENTS: tuple[str, ...] = (
    *(f"DROP TRIGGER search_held_{event}" for event in ("ai", "bu", "au", "bd", "kept")),
    "DROP VIEW search_text",
    "DROP TABLE search_fts",  # rebuilt below: its rowids change
    """CREATE TABLE search_docs_v29 (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        key TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('message', 'fact', 'task', 'decision', 'thread')),
        ref TEXT NOT NULL,
        room_id TEXT NOT NULL,
        sender TEXT,
        label TEXT,
        ts REAL NOT NULL,
        text TEXT,
        extra TEXT NOT NULL,
        gone INTEGER NOT NULL DEFAULT 0
    )""",
    # Held messages' rows go; the rest keep their order, above every held message's rowid.
    f"INSERT INTO search_docs_v29 (id, {_COLUMNS}) SELECT id + "
    f"(SELECT coalesce(max(rowid), 0) FROM held_messages), {_COLUMNS} FROM search_docs d "
    "WHERE NOT (substr(d.key, 1, 2) = 'm:' AND EXISTS "
    "(SELECT 1 FROM held_messages h WHERE h.message_id = d.ref))",
    "DROP TABLE search_docs",  # and its triggers and index
    "PRAGMA legacy_alter_table = ON",
    "ALTER TABLE search_docs_v29 RENAME TO search_docs",
    "PRAGMA legacy_alter_table = OFF",
    "CREATE INDEX search_docs_gone ON search_docs (ts) WHERE gone = 1",
    # The counter both tables take their ids from starts above both.
    "DELETE FROM sqlite_sequence WHERE name IN ('search_docs', 'search_docs_v29')",
    "INSERT INTO sqlite_sequence (name, seq) VALUES ('search_docs', max("
    "(SELECT coalesce(max(id), 0) FROM search_docs), "
    "(SELECT coalesce(max(rowid), 0) FROM held_messages)))",
    _VIEW,
    # As step 25 made it (schema_search.py), over the view.
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, extra, content='search_text', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2', prefix='4')",
    "INSERT INTO search_fts (search_fts, rank) VALUES ('rank', 'bm25(1.0, 0.4)')",
    "INSERT INTO search_fts (search_fts) VALUES ('rebuild')",
    f"CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN {_index('NEW.id')}; END",
    f"CREATE TRIGGER search_docs_bd BEFORE DELETE ON search_docs BEGIN {_unindex('OLD.id')}; "
    "END",
    *_HELD_TRIGGERS,
    # Ids as blobs (crosstalk/store/ids.py): held messages', their notices', the record's.
    *(f"UPDATE {table} SET {column} = {SQL_FUNCTION}({column}) WHERE typeof({column}) = 'text'"
      for table, column in (("held_messages", "message_id"), ("notices", "message_id"),
                            ("attention_record", "item"))),
)
