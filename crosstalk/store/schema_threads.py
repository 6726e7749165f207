"""Tables for threads (migration step 10).

``sent_messages`` gains the thread, the message it replies to and its text, so a thread shows
our side too (received messages keep theirs in their held body). ``threads`` records a closed
thread's summary, whoever closed it (us, or a participant whose closing message arrived).
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    "ALTER TABLE sent_messages ADD COLUMN thread TEXT",
    "ALTER TABLE sent_messages ADD COLUMN reply_to TEXT",
    "ALTER TABLE sent_messages ADD COLUMN text TEXT",
    """CREATE TABLE threads (
        thread TEXT PRIMARY KEY,
        summary TEXT NOT NULL,
        closed_by TEXT NOT NULL,
        closed_at REAL NOT NULL
    )""",
)
