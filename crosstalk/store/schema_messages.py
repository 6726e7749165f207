"""Tables for messages (migration step 5): what we sent and how far it got.

``sent_messages`` records each message we sent and the furthest delivery state any recipient
reported (``delivered``: their daemon committed it; ``read``: an agent read it). ``queued`` and
``sent`` come from the outbox.

Migration step 8 adds ``refused_ops`` (a post the relay will never take: the outbox row goes, the
relay's code and sentence stay, so ``sent`` can say ``refused`` and why) and
``notices.withdrawn_at`` (the message was read, answered or its ask ended: the notice about it
no longer surfaces or shows).

Migration step 23 adds who refused a message we sent and why (``refused_by``, a fingerprint;
``refusal``, the reason): a recipient's attention gate refused it, which its automatic
``refusal`` op reports (crosstalk/core/delivery.py: refused is final).
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

STATEMENTS_V8: tuple[str, ...] = (
    """CREATE TABLE refused_ops (
        op_id TEXT PRIMARY KEY,
        room_id TEXT NOT NULL,
        code TEXT NOT NULL,
        reason TEXT NOT NULL,
        refused_at REAL NOT NULL
    )""",
    "ALTER TABLE notices ADD COLUMN withdrawn_at REAL",
)

STATEMENTS_V23: tuple[str, ...] = (
    "ALTER TABLE sent_messages ADD COLUMN refused_by TEXT",
    "ALTER TABLE sent_messages ADD COLUMN refusal TEXT",
)
