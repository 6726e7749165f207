"""Less disk per message, second pass (migration step 27; issue 41, item 4).

Step 26 (schema_disk.py) trimmed the link's copies of sealed ops; what a message still cost was
mostly its words kept several times over. This step keeps them once.

**Search reads a message's words from the message.** ``search_docs`` kept a copy of the text it
indexed (FTS5 reads it back for snippets and must be handed it again to delete an entry), so a
message's words sat in ``held_messages`` (or ``sent_messages``) and in ``search_docs``. Now a
message's search row keeps ``text`` NULL while its message is held or sent, and FTS5's
external content is the view ``search_text``, which reads it from the message row
(crosstalk/store/schema_search.py's own expression, so the words indexed are the words read
back; ``extra``, a message's slice labels, short or empty, stays a copy: see ``_VIEW``).
Rows without such a source (facts, tasks, decisions, closed threads: not one per message) keep
their copy, and so does a message's row when its message goes while its room is marked ``left``
(the leave keeps what we could read searchable, schema_search.py): the trigger that marks it
``gone`` stores its words first. Search results, snippets included, are as before.

The rule that keeps FTS5 right: an index entry is deleted (``search_docs_bd``, BEFORE DELETE on
``search_docs``) while ``search_text`` can still read the words it was made from. So the triggers
on ``held_messages`` and ``sent_messages`` that take a search row away run BEFORE the message is
deleted or rewritten, and the row for the new words is made AFTER; nothing updates a search
row's words in place (storing a going message's words changes none of them, so no re-index).

**The page's words of a message we sent go on its ``sent_messages`` row.** The page kept the op of
each message we send in its own table, ``ui_sent_words`` (schema_ui.py): a second row with the
ids, time and most of what ``sent_messages`` holds, and two index entries. A message ``send``
recorded now keeps the op on its row (``words``: what the row does not hold already,
crosstalk/store/ui.py); ``ui_sent_words`` keeps only the ops ``sent`` does not list.

**A notice keeps what the gate decided, not what its message says.** Each notice copied six of
its held message's columns (sender, room, intent, target, the session it came from, kind), and
``notices_by_sender`` indexed one of them for ``peers``. They are dropped (``ALTER TABLE ... DROP
COLUMN`` rewrites the table without them); every reader joins the held message by its id
(crosstalk/store/attention.py, gate.py, peers.py). The label stays: it is the gate's name for the
source at the time, not the message's. A notice whose message a leave took reads the defaults
(no sender, no room, ``fyi``).
"""

from __future__ import annotations

from crosstalk.store import schema_search
from crosstalk.store.schema_search import held_labels, held_row, held_text, sent_row

_COLUMNS = "key, kind, ref, room_id, sender, label, ts, text, extra"
_KEPT_IF_LEFT = "EXISTS (SELECT 1 FROM rooms WHERE room_id = OLD.room_id AND state = 'left')"

# Every trigger that names search_docs goes before the table is rebuilt (a rename re-reads them).
_OLD_TRIGGERS = (
    *(f"search_{source}_{event}"
      for source in ("held", "sent", "record", "thread") for event in ("ai", "au", "ad")),
    "search_held_gone", "search_docs_ai", "search_docs_ad", "search_docs_au",
)

#: The words of each search row: its own copy, else its message's (held, or sent by us).
#: ``extra`` stays a copy: a message's slice labels, short or empty, are read from its body
#: with ``json_each``, and FTS5 reads its content with virtual tables barred (it prepares with
#: SQLITE_PREPARE_NO_VTAB), so a view that calls it fails ("SQL logic error").
_VIEW = (
    "CREATE VIEW search_text (id, text, extra) AS SELECT d.id, "
    "CASE WHEN d.text IS NOT NULL THEN d.text WHEN substr(d.key, 1, 2) = 'm:' THEN "
    f"(SELECT {held_text('h')} FROM held_messages h WHERE h.message_id = d.ref) "
    "ELSE (SELECT s.text FROM sent_messages s WHERE s.msg_id = d.ref) END, d.extra "
    "FROM search_docs d"
)


def _message_triggers(
    table: str, name: str, key: str, select: str, changed: str, *, mark_gone: bool
) -> tuple[str, ...]:
    """The triggers that keep ``table``'s messages in ``search_docs`` without their words."""
    insert = f"INSERT INTO search_docs ({_COLUMNS}) {select}"
    gone = ", gone = 1" if mark_gone else ""
    return (
        f"CREATE TRIGGER search_{name}_ai AFTER INSERT ON {table} BEGIN "
        f"DELETE FROM search_docs WHERE key = {key.format(row='NEW')}; "
        f"{insert.format(row='NEW')}; END",
        f"CREATE TRIGGER search_{name}_bu BEFORE UPDATE OF {changed} ON {table} BEGIN "
        f"DELETE FROM search_docs WHERE key = {key.format(row='OLD')}; END",
        f"CREATE TRIGGER search_{name}_au AFTER UPDATE OF {changed} ON {table} BEGIN "
        f"{insert.format(row='NEW')}; END",
        f"CREATE TRIGGER search_{name}_bd BEFORE DELETE ON {table} WHEN NOT {_KEPT_IF_LEFT} "
        f"BEGIN DELETE FROM search_docs WHERE key = {key.format(row='OLD')}; END",
        # A left room's message goes, its search row stays: with its own copy of the words.
        f"CREATE TRIGGER search_{name}_kept BEFORE DELETE ON {table} WHEN {_KEPT_IF_LEFT} "
        "BEGIN UPDATE search_docs SET text = (SELECT t.text FROM search_text t "
        f"WHERE t.id = search_docs.id){gone} WHERE key = {key.format(row='OLD')}; END",
    )


_SEARCH: tuple[str, ...] = (
    *(f"DROP TRIGGER {name}" for name in _OLD_TRIGGERS),
    "DROP TABLE search_fts",
    "ALTER TABLE search_docs RENAME TO search_docs_v26",
    """CREATE TABLE search_docs (
        id INTEGER PRIMARY KEY,
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
    # Same ids (the index is rebuilt from them below); a message still here drops its words.
    f"INSERT INTO search_docs (id, {_COLUMNS}, gone) SELECT id, key, kind, ref, room_id, "
    "sender, label, ts, CASE WHEN src THEN NULL ELSE text END, "
    "extra, gone FROM (SELECT *, "
    "(substr(key, 1, 2) = 'm:' AND EXISTS (SELECT 1 FROM held_messages h "
    "WHERE h.message_id = ref)) OR (substr(key, 1, 2) = 's:' AND EXISTS "
    "(SELECT 1 FROM sent_messages s WHERE s.msg_id = ref)) AS src FROM search_docs_v26)",
    "DROP TABLE search_docs_v26",
    "CREATE INDEX search_docs_gone ON search_docs (ts) WHERE gone = 1",
    _VIEW,
    # As step 25 made it (schema_search.py), over the view.
    "CREATE VIRTUAL TABLE search_fts USING fts5(text, extra, content='search_text', "
    "content_rowid='id', tokenize='porter unicode61 remove_diacritics 2', prefix='4')",
    "INSERT INTO search_fts (search_fts, rank) VALUES ('rank', 'bm25(1.0, 0.4)')",
    "INSERT INTO search_fts (search_fts) VALUES ('rebuild')",
    "CREATE TRIGGER search_docs_ai AFTER INSERT ON search_docs BEGIN "
    "INSERT INTO search_fts (rowid, text, extra) "
    "SELECT id, text, extra FROM search_text WHERE id = NEW.id; END",
    "CREATE TRIGGER search_docs_bd BEFORE DELETE ON search_docs BEGIN "
    "INSERT INTO search_fts (search_fts, rowid, text, extra) "
    "SELECT 'delete', id, text, extra FROM search_text WHERE id = OLD.id; END",
    *_message_triggers("held_messages", "held", "'m:' || {row}.message_id",
                       held_row("{row}", "NULL", held_labels("{row}")), "body", mark_gone=True),
    *_message_triggers("sent_messages", "sent", "'s:' || {row}.msg_id",
                       sent_row("{row}", "NULL", "''"), "text, room_id, created_at",
                       mark_gone=False),
    *(stmt for stmt in schema_search.STATEMENTS if stmt.startswith(
        ("CREATE TRIGGER search_record_", "CREATE TRIGGER search_thread_"))),
)

_PAGE: tuple[str, ...] = (
    # The op of a message we sent, without what the row holds (crosstalk/store/ui.py).
    "ALTER TABLE sent_messages ADD COLUMN words TEXT",
    # The page's kept ops of messages `sent` lists move onto their rows as they are (the page
    # fills in only what an op leaves out: before this step, the text its row holds).
    "UPDATE sent_messages SET words = (SELECT w.body FROM ui_sent_words w "
    "WHERE w.msg_id = sent_messages.msg_id AND w.room_id = sent_messages.room_id) "
    "WHERE msg_id IN (SELECT msg_id FROM ui_sent_words)",
    "DELETE FROM ui_sent_words WHERE msg_id IN "
    "(SELECT msg_id FROM sent_messages WHERE words IS NOT NULL)",
    # The page reads a room's newest (ui_sent_words_by_room serves the rest).
    "CREATE INDEX sent_messages_words ON sent_messages (room_id, created_at) "
    "WHERE words IS NOT NULL",
)

_NOTICES: tuple[str, ...] = (
    "DROP INDEX notices_by_sender",
    *(f"ALTER TABLE notices DROP COLUMN {column}"
      for column in ("target", "sender", "from_session", "room_id", "intent", "kind")),
)

STATEMENTS: tuple[str, ...] = (*_SEARCH, *_PAGE, *_NOTICES)
