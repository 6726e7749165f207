"""What the gate actor reads from and writes to the database, inside the transactions it opens.

The gate decides from facts the daemon itself holds (:func:`source_of`: our name for the
sender's key, whether we share a room of two, the bot flag pairing stored) and records each
decision as a ``notices`` row plus an attention entry (:func:`record`). Held notices come back as
the core's :class:`HeldItem` (:func:`held_item`) and are marked surfaced batch by batch
(:func:`mark_batch`). :func:`undecided` finds what a crash between a room's commit and the gate
left undecided. Every function takes the open connection and leaves committing to the caller.
"""

from __future__ import annotations

import json
import logging
import sqlite3

import attrs

from crosstalk.core.attention import AttentionEntry
from crosstalk.core.gate import Verdict
from crosstalk.core.gate_routing import SESSION_TTL, due, live_sessions
from crosstalk.core.held import HeldBatch, HeldItem
from crosstalk.core.levels import LOCAL_PREFIX, Source
from crosstalk.core.room import Applied
from crosstalk.core.triage import Decision, Kind
from crosstalk.errors import RemoteProtocolError
from crosstalk.store import attention as db
from crosstalk.store.asks import withdraw_if_ended
from crosstalk.store.ids import from_db, to_db
from crosstalk.store.rooms import direct_room_with, find_contact
from crosstalk.store.sessions import Session, seen_since
from crosstalk.wire.converter import structure_remote
from crosstalk.wire.room_ops import MessageOp

log = logging.getLogger(__name__)

LOCAL_ROOM = "local"
"""The ``room_id`` of held messages that never crossed a relay: posts and ``me/SESSION``."""


def source_of(conn: sqlite3.Connection, fingerprint: str) -> Source:
    """The sender as we know them: our name for their key, a room of two, the bot flag."""
    contact = find_contact(conn, fingerprint)
    if contact is not None:
        label = contact.label
    else:
        row = conn.execute(
            "SELECT label FROM room_members WHERE fingerprint = ? ORDER BY named DESC LIMIT 1",
            (fingerprint,),
        ).fetchone()
        label = str(row[0]) if row else fingerprint
    return Source(
        person=fingerprint,
        label=label,
        direct=direct_room_with(conn, fingerprint) is not None,
        bot=contact is not None and contact.is_agent,
    )


def local_source(sender: str) -> Source:
    """The source of a message that crossed no relay: a post, or another of our own sessions."""
    if sender.startswith(LOCAL_PREFIX):
        return Source.local_post(sender.removeprefix(LOCAL_PREFIX))
    return Source(person=sender, label="me", local=True)


def live(conn: sqlite3.Connection, now: float) -> list[Session]:
    """The live sessions, most recently seen first (see :func:`live_sessions`).

    Only the sessions seen within the live window are read (a second's margin: the core's
    comparison decides); not every session retention keeps, which a hook's turn used to pay
    for, about 4 us each.
    """
    return live_sessions(seen_since(conn, now - SESSION_TTL - 1.0), now)


def undecided(conn: sqlite3.Connection, since: float) -> list[Applied]:
    """Held room messages received after ``since`` that the gate never decided, oldest first.

    They were committed, then the daemon stopped before the gate saw them. One that no longer
    parses is logged and skipped.
    """
    rows = conn.execute(
        "SELECT h.message_id, h.room_id, h.sender, h.body FROM held_messages h "
        "WHERE h.read_at IS NULL AND h.received_at > ? AND NOT EXISTS "
        "(SELECT 1 FROM notices n WHERE n.message_id = h.message_id) "
        "ORDER BY h.received_at, h.rowid",
        (since,),
    ).fetchall()
    found = []
    for stored_id, room_id, sender, body in rows:
        message_id = from_db(stored_id)
        try:
            data = json.loads(body)
            relay_ts = float(data.pop("relay_ts", 0.0))
            data.setdefault("msg_id", message_id)  # the row's key (messages.body_json)
            op = structure_remote(data, MessageOp)
        except (ValueError, TypeError, RemoteProtocolError):
            log.warning("gate: held message %s does not parse; not decided", message_id)
            continue
        found.append(Applied(room_id, 0, message_id, sender, relay_ts, op))
    return found


def record(
    conn: sqlite3.Connection,
    applied: Applied,
    op: MessageOp,
    source: Source,
    session: str | None,
    verdict: Verdict,
    now: float,
) -> None:
    """Record one decision: its ``notices`` row and attention entry; a drop marks it read."""
    decision = verdict.decision
    db.add_notice(
        conn,
        db.Notice(
            message_id=applied.op_id, session=session, target=op.to, sender=applied.sender,
            label=source.label, from_session=op.from_session, room_id=applied.room_id,
            intent=op.intent, kind=op.kind.value, decision=decision,
            due=due(decision, op.intent), created_at=now,
            surfaced_at=now if decision.interrupts else None,
        ),
    )
    db.append_attention(conn, [AttentionEntry(applied.op_id, source.label, now, decision)])
    if op.kind is Kind.ASK:  # its asker may have stopped waiting before we decided it
        withdraw_if_ended(conn, applied.op_id, now)
    if decision is Decision.DROP:
        # The `mute` level: nothing reaches you. Kept for `read --all`, hidden from `read`.
        conn.execute(
            "UPDATE held_messages SET read_at = ? WHERE message_id = ? AND read_at IS NULL",
            (now, to_db(applied.op_id)),
        )
    elif decision is Decision.REFUSE:
        keep_only_the_refusal(conn, applied.op_id, op, source.label, now)


REFUSED_KEY = "refused_here"
"""Marks a held body whose words and slices were dropped because we refused it."""


def keep_only_the_refusal(
    conn: sqlite3.Connection, message_id: str, op: MessageOp, label: str, now: float
) -> None:
    """A refused ask or handoff leaves nothing readable but its refusal (issue 19 item 7).

    Its words and slices are replaced by one line saying what was refused; it is marked read, so
    plain ``read`` does not show it, ``read --all`` shows the refusal, and ``slice`` is refused.
    """
    row = conn.execute(
        "SELECT body FROM held_messages WHERE message_id = ?", (to_db(message_id),)
    ).fetchone()
    if row is None:
        return
    body = json.loads(row[0])
    body.update(
        text=f"(you refused this {op.kind.value} from {label}; its words and slices were not kept)",
        slices=[],
        **{REFUSED_KEY: True},
    )
    conn.execute(
        "UPDATE held_messages SET body = ?, read_at = coalesce(read_at, ?) WHERE message_id = ?",
        (json.dumps(body, sort_keys=True), now, to_db(message_id)),
    )


def held_item(notice: db.Notice) -> HeldItem:
    """A held notice as the core's release logic sees it."""
    return HeldItem(
        item=notice.message_id,
        sender=notice.sender,
        label=notice.label,
        session=notice.from_session,
        room=notice.room_id,
        ts=notice.created_at,
        intent=notice.intent,
        decision=notice.decision,
        words=notice.decision.words,
    )


def mark_batch(
    conn: sqlite3.Connection, batch: HeldBatch, claim: str | None, batch_id: str, now: float
) -> None:
    """Mark a released batch surfaced to ``claim`` and add its items to the attention record."""
    for item in batch.items:
        db.mark_surfaced(conn, item.item, claim, batch_id, now)
    db.append_attention(
        conn,
        [
            AttentionEntry(
                it.item, it.label, now, Decision.DELIVER_NOW if it.words else Decision.NOTICE_NOW
            )
            for it in batch.items
        ],
    )


@attrs.frozen
class SurfacedNotice:
    """A notice the gate surfaced that no session has shown yet, with its held body (if any)."""

    message_id: str
    session: str | None
    target: str | None
    label: str
    from_session: str | None
    kind: str
    decision: str
    batch: str | None
    body: str | None


def surfaced_unshown(conn: sqlite3.Connection, since: float) -> list[SurfacedNotice]:
    """Notices surfaced after ``since``, not shown and not withdrawn, in the order they came."""
    rows = conn.execute(
        "SELECT n.message_id, n.session, h.target_session, n.label, CASE WHEN json_valid(h.body) "
        "THEN json_extract(h.body, '$.from_session') END, coalesce(CASE WHEN json_valid(h.body) "
        "THEN json_extract(h.body, '$.kind') END, 'message'), n.decision, "
        "n.batch, h.body FROM notices n LEFT JOIN held_messages h ON h.message_id = n.message_id "
        "WHERE n.surfaced_at IS NOT NULL AND n.shown_at IS NULL AND n.withdrawn_at IS NULL "
        "AND n.surfaced_at > ? "
        "ORDER BY n.created_at, n.id",
        (since,),
    ).fetchall()
    return [SurfacedNotice(from_db(row[0]), *row[1:]) for row in rows]
