"""What ``peers``, ``cost`` and ``rename`` read and write about the people we know.

Every function takes the open connection, so it composes inside one ``store.read`` or
``store.write`` transaction.
"""

from __future__ import annotations

import sqlite3

import attrs


@attrs.frozen
class Traffic:
    """What went to and came from one contact: counts and characters."""

    sent: int
    sent_chars: int
    received: int
    received_chars: int
    shown: int  # notices about their messages that surfaced in a session


def unread_by_sender(conn: sqlite3.Connection) -> dict[str, int]:
    """How many held messages from each sender are not read yet."""
    rows = conn.execute(
        "SELECT sender, count(*) FROM held_messages WHERE read_at IS NULL GROUP BY sender"
    )
    return {str(sender): int(n) for sender, n in rows}


def traffic_with(conn: sqlite3.Connection, label: str, fingerprint: str) -> Traffic:
    """What we sent to ``label`` and held from ``fingerprint``, and how much of it surfaced."""
    sent, out_chars = conn.execute(
        "SELECT count(*), coalesce(sum(chars), 0) FROM sent_messages WHERE to_label = ?",
        (label,),
    ).fetchone()
    received, in_chars = conn.execute(
        "SELECT count(*), coalesce(sum(length(body)), 0) FROM held_messages WHERE sender = ?",
        (fingerprint,),
    ).fetchone()
    shown = conn.execute(
        "SELECT count(*) FROM held_messages h JOIN notices n ON n.message_id = h.message_id "
        "WHERE h.sender = ? AND n.shown_at IS NOT NULL",
        (fingerprint,),
    ).fetchone()[0]
    return Traffic(int(sent), int(out_chars), int(received), int(in_chars), int(shown))


def relabel_contact(conn: sqlite3.Connection, fingerprint: str, old: str, new: str) -> None:
    """Call the contact ``new`` everywhere we called them ``old``: the contact, their roster
    rows, our room of two with them (named after them) and what we sent them."""
    conn.execute("UPDATE contacts SET label = ? WHERE fingerprint = ?", (new, fingerprint))
    conn.execute("UPDATE room_members SET label = ? WHERE fingerprint = ?", (new, fingerprint))
    conn.execute(
        "UPDATE rooms SET name = ? WHERE kind = 'direct' AND name = ? AND room_id IN "
        "(SELECT room_id FROM room_members WHERE fingerprint = ?)",
        (new, old, fingerprint),
    )
    conn.execute("UPDATE sent_messages SET to_label = ? WHERE to_label = ?", (new, old))
