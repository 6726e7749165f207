"""The applier that names room members from signed ops (the relay's roster has no names).

A ``MemberNamed`` op counts when its signer is the member or whoever added them; the label a
member puts on their own messages and memory ops names them too while we only have a
placeholder (they joined while we were away, and we missed the op that named them).
"""

from __future__ import annotations

import sqlite3

from crosstalk.actors.room import Applied
from crosstalk.features.membership import queries as q
from crosstalk.features.membership.core import PLACEHOLDER, name_member
from crosstalk.wire.room_ops import MemberNamed, MemoryEnvelope, MessageOp


def apply_names(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: take a member's name from the op, when it is theirs to give."""
    op = applied.op
    if isinstance(op, MemberNamed):
        subject, label = op.fingerprint, op.label
    elif isinstance(op, MessageOp) and op.from_label:
        subject, label = applied.sender, op.from_label
    elif isinstance(op, MemoryEnvelope) and op.label:
        subject, label = applied.sender, op.label
    else:
        return
    row = q.member(conn, applied.room_id, subject)
    if row is None:
        return  # nobody we know in this room (a name for someone who has since gone)
    by_self = applied.sender == subject
    if not isinstance(op, MemberNamed) and row.named != PLACEHOLDER:
        return  # a message's label only fills a placeholder; names change by MemberNamed
    if not by_self and applied.sender != row.added_by:
        return  # only the member or their adder may name them
    renamed = name_member(row, label, by_self=by_self)
    if renamed is not None:
        q.rename(conn, applied.room_id, renamed)
