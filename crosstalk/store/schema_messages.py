"""Tables for messages (migration step 5): what we sent and how far it got.

``sent_messages`` records each message we sent and the furthest delivery state any recipient
reported (``delivered``: their daemon committed it; ``read``: an agent read it). ``queued`` and
``sent`` come from the outbox.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE sent_messages (
        msg_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL,
        to_label TEXT NOT NULL,
        kind TEXT NOT NULL,
        receipt TEXT CHECK (receipt IN ('delivered', 'read')),
        chars INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    )""",
)
