"""The page's table (migration step 12).

The relay never echoes our own ops back, and ``sent_messages`` keeps who a message went to, how
far it got and its text, not the whole op (intent, slices): the page keeps the op of each message
we send in ``ui_sent_words``, written after the op is committed to the outbox. Since migration 27
(schema_lean.py) a message ``sent`` lists keeps it on its ``sent_messages`` row instead.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE ui_sent_words (
        msg_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL,
        body TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX ui_sent_words_by_room ON ui_sent_words (room_id, created_at)",
)
