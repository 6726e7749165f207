"""Less disk per message (migration step 26; issue 41, item 4).

The outbox kept every op it ever sent and ``relay_inbound`` every op it received, each a whole
sealed op (about 800 bytes with its index entries), for the 30 days of retention: the straight
line in a busy identity's ``state.db``. Both are now trimmed moments after the op is done
(crosstalk/store/retention.py ``trim``). What outlived the outbox row is written elsewhere first:

* a message's ``sent`` step: the relay's seq on its ``sent_messages`` row, written when the link
  records the post as sequenced (crosstalk/store/link.py ``mark_sent``); this step copies it from
  the outbox rows still there, so no message of an existing store goes back to ``queued``;
* the relay's clock (crosstalk/store/reservations.py ``relay_now``): from each room's newest
  inbound row, which the trim keeps.

The two indexes by time on those tables go: they served retention's age rules, and a table that
holds only what is in flight is read whole in less time than its index costs to keep. So does
``notices_waiting``: no query uses it (``EXPLAIN QUERY PLAN`` over every query on ``notices``;
the held-notice scans are pinned to ``notices_held``, since the planner picking this index made
their cost grow with history), yet every notice ever made had an entry in it.

``search_docs_by_room`` goes too (an entry per message on both sides): a search is driven by the
FTS5 index and reaches ``search_docs`` by rowid whatever it filters on, so only retention used
it, to find the messages of rooms we left. Those rows are marked instead: ``gone`` is set, by a
trigger, when a left room's held message is deleted (crosstalk/store/schema_search.py keeps
their search rows), and a partial index holds the marked rows alone. ``search_docs_au`` now
fires on a change of the indexed text only, so marking a row does not re-index it.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    # NULL until the relay sequenced the message; then its seq (the `sent` delivery step).
    "ALTER TABLE sent_messages ADD COLUMN seq INTEGER",
    "UPDATE sent_messages SET seq = (SELECT o.seq FROM outbox o "
    "WHERE o.op_id = sent_messages.msg_id AND o.state = 'sent') WHERE seq IS NULL",
    "DROP INDEX IF EXISTS outbox_by_time",
    "DROP INDEX IF EXISTS relay_inbound_by_time",
    "DROP INDEX IF EXISTS notices_waiting",
    # A left room's messages, whose held rows went with the leave: retention ages them out.
    "ALTER TABLE search_docs ADD COLUMN gone INTEGER NOT NULL DEFAULT 0",
    "UPDATE search_docs SET gone = 1 WHERE substr(key, 1, 2) = 'm:' AND room_id IN "
    "(SELECT room_id FROM rooms WHERE state = 'left')",
    "CREATE TRIGGER search_held_gone AFTER DELETE ON held_messages WHEN EXISTS "
    "(SELECT 1 FROM rooms WHERE room_id = OLD.room_id AND state = 'left') BEGIN "
    "UPDATE search_docs SET gone = 1 WHERE key = 'm:' || OLD.message_id; END",
    "CREATE INDEX search_docs_gone ON search_docs (ts) WHERE gone = 1",
    "DROP INDEX IF EXISTS search_docs_by_room",
    "DROP TRIGGER search_docs_au",
    "CREATE TRIGGER search_docs_au AFTER UPDATE OF text, extra ON search_docs BEGIN "
    "INSERT INTO search_fts (search_fts, rowid, text, extra) "
    "VALUES ('delete', OLD.id, OLD.text, OLD.extra); "
    "INSERT INTO search_fts (rowid, text, extra) VALUES (NEW.id, NEW.text, NEW.extra); END",
)
