"""The applier that names room members from signed ops (the relay's roster has no names).

A ``MemberNamed`` op counts when its signer is the member or whoever added them; the label a
member puts on their own messages and memory ops names them too while we only have a
placeholder (they joined while we were away, and we missed the op that named them).
"""

from __future__ import annotations

import sqlite3

from crosstalk.core.members import PLACEHOLDER
from crosstalk.core.room import Applied
from crosstalk.features.membership.core import name_member
from crosstalk.store import membership as q
from crosstalk.wire.room_ops import MemberNamed, MemoryEnvelope, MessageOp


def apply_names(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: take members' names from the op, when they are the signer's to give."""
    op = applied.op
    if isinstance(op, MemberNamed):
        for subject, label in op.names.items():
            _name(conn, applied, subject, label, from_message=False)
    elif isinstance(op, MessageOp) and op.from_label:
        _name(conn, applied, applied.sender, op.from_label, from_message=True)
    elif isinstance(op, MemoryEnvelope) and op.label:
        _name(conn, applied, applied.sender, op.label, from_message=True)


def _name(
    conn: sqlite3.Connection, applied: Applied, subject: str, label: str, *, from_message: bool
) -> None:
    row = q.member(conn, applied.room_id, subject)
    if row is None:
        return  # nobody we know in this room (a name for someone who has since gone)
    by_self = applied.sender == subject
    if from_message and row.named != PLACEHOLDER:
        return  # a message's label only fills a placeholder; names change by MemberNamed
    if not by_self and applied.sender != row.added_by and row.named != PLACEHOLDER:
        return  # anyone in the room may fill a placeholder; only the adder may rename
    renamed = name_member(row, label, by_self=by_self)
    if renamed is not None:
        q.rename(conn, applied.room_id, renamed)


def welcome(conn: sqlite3.Connection, applied: Applied, me: str) -> MemberNamed | None:
    """The names to tell a newcomer we added, once their own name for themselves arrives (they
    joined after the ops that named everyone before them); None when there is nothing to do."""
    op = applied.op
    if not isinstance(op, MemberNamed) or set(op.names) != {applied.sender}:
        return None
    row = q.member(conn, applied.room_id, applied.sender)
    if row is None or row.added_by != me:
        return None
    names = {
        m.fingerprint: m.label
        for m in q.roster(conn, applied.room_id)
        if not m.gone and m.named != PLACEHOLDER and m.fingerprint != applied.sender
    }
    return MemberNamed(names) if names else None
