"""The applier that names room members from signed ops (the relay's roster has no names).

A ``MemberNamed`` op counts when its signer is the member or whoever added them; the label a
member puts on their own messages and memory ops names them too while we only have a
placeholder (they joined while we were away, and we missed the op that named them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from crosstalk.core.members import PLACEHOLDER
from crosstalk.core.room import Applied
from crosstalk.features.membership.core import name_member
from crosstalk.store import membership as q
from crosstalk.wire.room_ops import MemberNamed, MemoryEnvelope, MessageOp

_LABELLED = (MessageOp, MemoryEnvelope)  # ops whose author label may fill a placeholder


class Names:
    """The applier, and its apply scope: within one batch of a room's ops, a member found named
    already (not a placeholder) is not read again for each of their messages and memory ops.

    Only ``MemberNamed`` changes such a name, and only an op of another kind may change the
    roster under us (through another feature's applier, in the same transaction), so either
    forgets what the batch learned. A catch-up of memory ops read the member once per op:
    6-7 µs an op, about a fifth of what it costs beyond opening (docs/performance.md).
    """

    def __init__(self) -> None:
        self._named: set[tuple[str, str]] | None = None  # (room, fingerprint); None: no batch

    @contextmanager
    def batch(self, conn: sqlite3.Connection) -> Iterator[None]:
        """Apply scope: remember, for this batch only, who is named already."""
        self._named = set()
        try:
            yield
        finally:
            self._named = None

    def apply(self, conn: sqlite3.Connection, applied: Applied) -> None:
        """Applier: take members' names from the op, when they are the signer's to give."""
        op = applied.op
        if isinstance(op, _LABELLED):
            label = op.from_label if isinstance(op, MessageOp) else op.label
            if label:
                self._from_label(conn, applied, label)
            return
        if self._named is not None:
            self._named.clear()
        if isinstance(op, MemberNamed):
            for subject, label in op.names.items():
                _name(conn, applied, subject, label, from_message=False)

    def _from_label(self, conn: sqlite3.Connection, applied: Applied, label: str) -> None:
        key = (applied.room_id, applied.sender)
        if self._named is not None and key in self._named:
            return  # a message's label only fills a placeholder, and there is none
        if _name(conn, applied, applied.sender, label, from_message=True) and (
            self._named is not None
        ):
            self._named.add(key)


def _name(
    conn: sqlite3.Connection, applied: Applied, subject: str, label: str, *, from_message: bool
) -> bool:
    """Name ``subject`` if the op may; returns whether they are named now (not a placeholder)."""
    row = q.member(conn, applied.room_id, subject)
    if row is None:
        return False  # nobody we know in this room (a name for someone who has since gone)
    by_self = applied.sender == subject
    if from_message and row.named != PLACEHOLDER:
        return True  # a message's label only fills a placeholder; names change by MemberNamed
    if not by_self and applied.sender != row.added_by and row.named != PLACEHOLDER:
        return True  # anyone in the room may fill a placeholder; only the adder may rename
    renamed = name_member(row, label, by_self=by_self)
    if renamed is not None:
        q.rename(conn, applied.room_id, renamed)
    return (renamed or row).named != PLACEHOLDER


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
