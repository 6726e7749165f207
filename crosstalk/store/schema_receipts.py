"""The receipts we owe senders (migration step 13).

A ``delivered`` or ``read`` receipt is owed from the moment the message is held (the room's
apply transaction) or acknowledged (the ``ack`` transaction): the row is written in that same
transaction, so no cancellation or crash between the commit and the post can lose it. The
receipts actor (crosstalk/actors/receipts.py) posts each owed receipt and deletes its row only
after the post is committed to the outbox. The table holds unfinished work alone: a row lives
from its commit to the next drain.
"""

from __future__ import annotations

STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE receipts_owed (
        id INTEGER PRIMARY KEY,
        room_id TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('delivered', 'read')),
        msg_id TEXT NOT NULL,
        created_at REAL NOT NULL,
        UNIQUE (room_id, state, msg_id)
    )""",
)
