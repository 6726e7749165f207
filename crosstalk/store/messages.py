"""Messages as this machine keeps them: the ones held for us and the ones we sent.

``held_messages`` holds every message that came to us (from a room, or locally from a post or
our own other session), with ``read_at`` set once a reader acknowledged it; the gate's
``notices`` about it are withdrawn in the same transaction. ``sent_messages`` holds what we sent;
its ``receipt`` only moves forward (delivered, then read), and what the relay refused for good is
in ``refused_ops``. The delivery state of a sent message is read from those (``sent``: the
relay's seq on its ``sent_messages`` row, or its outbox row while that is there).

Every function takes the open connection, so it composes inside one ``store.read`` or
``store.write`` transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any

import attrs

from crosstalk.core.delivery import (
    Delivery,
    DeliveryState,
    Event,
    Step,
    furthest,
    receipt_event,
    settle,
)
from crosstalk.store.ids import from_db, prefix_where, to_db
from crosstalk.store.schema_compact import NEXT_HELD_ROWID
from crosstalk.wire.kinds import Intent, Kind

# --- held: what came to us ---------------------------------------------------------------------


@attrs.frozen
class HeldRow:
    """A held message as a reader sees it, with our names for its room and sender."""

    message_id: str
    sender: str
    body: str  # the op's JSON with its relay_ts
    received_at: float
    room_name: str | None
    sender_label: str | None  # a contact's label, else the name the room gave them
    read_at: float | None
    cursor: int = 0  # its rowid: later holds have larger ones (`watch` resumes after one)


#: Fields of a message op left out of its row when they hold these, their attrs defaults: the
#: most common intent and kind (every reader's ``.get`` and ``coalesce`` has the same default).
_DEFAULT_WORDS: Mapping[str, object] = {"intent": Intent.FYI.value, "kind": Kind.MESSAGE.value}


#: Fields of a message op no row keeps: its id (the row's key) and its sender's clock
#: (``sent_at``), which no reader uses: a message is dated by the relay's clock (``relay_ts``)
#: or its row's own time (``received_at``, ``created_at``).
_LEFT_OUT = ("msg_id", "sent_at")


def body_json(op: Mapping[str, object]) -> str:
    """A message op as its row keeps it: compact JSON without :data:`_LEFT_OUT` and without
    the fields that hold their default (None, false, no slices, an ``fyi`` intent, the
    ``message`` kind). Every reader takes a missing field as its default (the op's attrs
    defaults, ``.get`` with one, or ``json_extract``'s NULL under ``coalesce``) and the id
    from the row; left out, they were a third of each held message's bytes (issue 41).
    """
    kept = {
        k: v for k, v in op.items()
        if k not in _LEFT_OUT and v is not None and v is not False and v not in ([], ())
        and not (k in _DEFAULT_WORDS and v == _DEFAULT_WORDS[k])
    }
    return json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def hold(
    conn: sqlite3.Connection, *, message_id: str, room_id: str, sender: str, to: str | None,
    intent: str, body: str, received_at: float, once: bool = False,
) -> None:
    """Hold a message for our sessions; with ``once``, a message already held is kept as it is
    (a room op replayed after a reconnect)."""
    verb = "INSERT OR IGNORE" if once else "INSERT"
    conn.execute(
        f"{verb} INTO held_messages (rowid, message_id, room_id, sender, target_session, "
        f"target_project, intent, body, received_at) VALUES ({NEXT_HELD_ROWID}, "
        "?, ?, ?, ?, NULL, ?, ?, ?)",
        (to_db(message_id), room_id, sender, to, intent, body, received_at),
    )


def held_body(conn: sqlite3.Connection, message_id: str) -> str | None:
    """The stored body (JSON) of a held message, or None if we hold no such message."""
    row = conn.execute(
        "SELECT body FROM held_messages WHERE message_id = ?", (to_db(message_id),)
    ).fetchone()
    return None if row is None else str(row[0])


def held_sender_and_body(conn: sqlite3.Connection, message_id: str) -> tuple[str, str] | None:
    """``(sender, body)`` of a held message, or None if we hold no such message."""
    row = conn.execute(
        "SELECT sender, body FROM held_messages WHERE message_id = ?", (to_db(message_id),)
    ).fetchone()
    return None if row is None else (str(row[0]), str(row[1]))


def held_ids_from(conn: sqlite3.Connection, prefix: str, limit: int = 2) -> list[str]:
    """Up to ``limit`` held message ids that start with ``prefix`` (lowercase hex)."""
    where, args = prefix_where("message_id", prefix)
    rows = conn.execute(
        f"SELECT message_id FROM held_messages WHERE {where} LIMIT ?", (*args, limit)
    ).fetchall()
    return [from_db(r[0]) for r in rows]


def ask_with_correlation(conn: sqlite3.Connection, correlation: str) -> str | None:
    """The id of the held ask that carries ``correlation``, if any."""
    row = conn.execute(
        "SELECT message_id FROM held_messages WHERE json_extract(body, '$.correlation') = ? "
        "AND json_extract(body, '$.kind') = 'ask'",
        (correlation,),
    ).fetchone()
    return None if row is None else from_db(row[0])


_HELD_SELECT = (
    "SELECT h.message_id, h.sender, h.body, h.received_at, r.name, "
    # A contact's name, else the name the room gave someone we never paired with.
    "coalesce(c.label, (SELECT m.label FROM room_members m "
    "WHERE m.room_id = h.room_id AND m.fingerprint = h.sender)), h.read_at, h.rowid "
    "FROM held_messages h LEFT JOIN rooms r ON r.room_id = h.room_id "
    "LEFT JOIN contacts c ON c.fingerprint = h.sender WHERE 1 = 1"
)


def _held(rows: list[Any]) -> list[HeldRow]:
    return [
        HeldRow(from_db(r[0]), str(r[1]), str(r[2]), float(r[3]),
                None if r[4] is None else str(r[4]), None if r[5] is None else str(r[5]),
                None if r[6] is None else float(r[6]), int(r[7]))
        for r in rows
    ]


def held_rows(
    conn: sqlite3.Connection, *, include_read: bool, targets: list[str] | None
) -> list[HeldRow]:
    """Held messages, oldest first: unread only unless ``include_read``; with ``targets``, only
    those meant for everyone or for one of those session or project names."""
    where = ""
    if targets is not None:
        marks = ", ".join("?" for _ in targets)
        where = f" AND (h.target_session IS NULL OR h.target_session IN ({marks}))"
    rows = conn.execute(
        _HELD_SELECT
        + ("" if include_read else " AND h.read_at IS NULL")
        + where
        + " ORDER BY h.received_at, h.rowid",
        targets or [],
    ).fetchall()
    return _held(rows)


def held_after(conn: sqlite3.Connection, cursor: int, limit: int) -> list[HeldRow]:
    """Up to ``limit`` messages held after the one whose cursor is ``cursor``, in the order they
    were held (read or not): what a resumed ``watch`` missed.

    Cursors are rowids. SQLite gives a new row one more than the largest rowid in the table, so
    they grow in the order of the (single-writer) commits; one is reused only if the newest rows
    were deleted, which retention does to messages read days ago, never to what just arrived.
    """
    rows = conn.execute(
        _HELD_SELECT + " AND h.rowid > ? ORDER BY h.rowid LIMIT ?", (cursor, limit)
    ).fetchall()
    return _held(rows)


def held_with_ids(conn: sqlite3.Connection, ids: list[str]) -> list[HeldRow]:
    """The held messages among ``ids``, in the order they were held."""
    marks = ", ".join("?" for _ in ids)
    rows = conn.execute(
        _HELD_SELECT + f" AND h.message_id IN ({marks}) ORDER BY h.rowid",
        [to_db(i) for i in ids],
    ).fetchall()
    return _held(rows)


def last_cursor(conn: sqlite3.Connection) -> int:
    """The cursor of the newest held message (0 when none is held)."""
    row = conn.execute("SELECT max(rowid) FROM held_messages").fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def mark_read(conn: sqlite3.Connection, ids: list[str], now: float) -> dict[str, list[str]]:
    """Mark ``ids`` read and withdraw their notices; per room, the ids that became read now."""
    became: dict[str, list[str]] = {}
    for msg_id in dict.fromkeys(ids):
        row = conn.execute(
            "SELECT room_id FROM held_messages WHERE message_id = ? AND read_at IS NULL",
            (to_db(msg_id),),
        ).fetchone()
        if row is not None:
            conn.execute("UPDATE held_messages SET read_at = ? WHERE message_id = ?",
                         (now, to_db(msg_id)))
            became.setdefault(str(row[0]), []).append(msg_id)
    withdraw_notices(conn, ids, now)
    return became


def withdraw_notices(conn: sqlite3.Connection, ids: list[str], now: float) -> None:
    """The gate's notices about ``ids`` no longer surface or show (read, answered, ended)."""
    conn.executemany(
        "UPDATE notices SET withdrawn_at = ? WHERE message_id = ? AND withdrawn_at IS NULL",
        [(now, to_db(msg_id)) for msg_id in ids],
    )


# --- sent: what we sent ------------------------------------------------------------------------


@attrs.frozen
class SentRow:
    """One message we sent, as ``sent`` lists it."""

    msg_id: str
    to_label: str
    kind: str
    created_at: float
    text: str = ""  # its first TEXT_START characters


#: How much of each text ``sent`` carries: the start, enough for a line, never 64 KiB.
TEXT_START = 200


def record_sent(
    conn: sqlite3.Connection, *, msg_id: str, room_id: str, to_label: str, kind: str,
    chars: int, created_at: float, thread: str | None, reply_to: str | None, text: str,
) -> None:
    """Remember a message we sent (its delivery state is read from the outbox and receipts).

    A receipt that arrived before this (see :func:`record_receipt`) is kept."""
    conn.execute(
        "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, chars, created_at, "
        "thread, reply_to, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (msg_id) DO UPDATE SET room_id = excluded.room_id, "
        "to_label = excluded.to_label, kind = excluded.kind, chars = excluded.chars, "
        "created_at = excluded.created_at, thread = excluded.thread, "
        "reply_to = excluded.reply_to, text = excluded.text",
        (msg_id, room_id, to_label, kind, chars, created_at, thread, reply_to, text),
    )


def record_receipt(conn: sqlite3.Connection, room_id: str, msg_id: str, state: str) -> None:
    """A recipient in ``room_id`` reports ``state`` (delivered or read); it never moves back.

    The send records its message once the post is in the outbox, so a quick reader's receipt
    can arrive first (seed 73 of the simulation: read before ``send`` had returned). It is then
    kept on a row that :func:`record_sent` completes, for a message this machine posted.

    Raises:
        RemoteProtocolError: ``state`` is neither (the applier skips such a receipt).
    """
    _advance(conn, room_id, msg_id, receipt_event(state))


def record_refusal(
    conn: sqlite3.Connection, room_id: str, msg_id: str, *, by: str, reason: str
) -> None:
    """A member of ``room_id`` (fingerprint ``by``) refused our ``msg_id``: its gate's
    automatic refusal arrived. Final, whatever receipts come after (or came before)."""
    _advance(conn, room_id, msg_id, Event(Step.REFUSED, by=by, reason=reason))


def _advance(conn: sqlite3.Connection, room_id: str, msg_id: str, event: Event) -> None:
    """Move what recipients reported about ``msg_id`` on by ``event`` (:func:`furthest`).

    Only a message of ours in ``room_id`` moves: a report from another room, or about an id
    this machine never posted, changes nothing."""
    row = conn.execute(
        "SELECT receipt, refused_by, refusal FROM sent_messages WHERE msg_id = ? AND room_id = ?",
        (msg_id, room_id),
    ).fetchone()
    if row is None:
        conn.execute(
            "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, created_at) "
            "SELECT ?, ?, '', '', 0 WHERE EXISTS "
            "(SELECT 1 FROM outbox WHERE op_id = ? AND room_id = ?) "
            "ON CONFLICT (msg_id) DO NOTHING",
            (msg_id, room_id, msg_id, room_id),
        )
        row = (None, None, None)
    before = _reported(row[0], row[1], row[2])
    after = furthest(before, event)
    if after == before:
        return
    receipt = after.state.value if after.state in _RECEIPT_STATES else row[0]
    conn.execute(
        "UPDATE sent_messages SET receipt = ?, refused_by = ?, refusal = ? "
        "WHERE msg_id = ? AND room_id = ?",
        (receipt, after.by, after.reason, msg_id, room_id),
    )


_RECEIPT_STATES = (DeliveryState.DELIVERED, DeliveryState.READ)


def _reported(receipt: object, refused_by: object, refusal: object) -> Delivery:
    """What recipients reported, as stored: their furthest receipt, or their refusal."""
    if refusal is not None:
        return Delivery(DeliveryState.REFUSED, None if refused_by is None else str(refused_by),
                        str(refusal))
    if receipt is not None:
        return Delivery(DeliveryState(str(receipt)))
    return Delivery()


def member_label(conn: sqlite3.Connection, room_id: str, fingerprint: str) -> str:
    """What we call ``fingerprint``: a contact's label, else the room's name for them, else the
    start of the fingerprint."""
    row = conn.execute(
        "SELECT coalesce((SELECT label FROM contacts WHERE fingerprint = ?), "
        "(SELECT label FROM room_members WHERE room_id = ? AND fingerprint = ?))",
        (fingerprint, room_id, fingerprint),
    ).fetchone()
    return str(row[0]) if row and row[0] is not None else fingerprint[:8]


def delivery(conn: sqlite3.Connection, msg_id: str) -> Delivery:
    """Where ``msg_id`` stands: every report kept about it, settled by :func:`furthest`.

    The relay's answer is the seq on the ``sent_messages`` row or the outbox row (``sent``; the
    row is trimmed once sequenced, crosstalk/store/retention.py) or its refusal
    (``refused_ops``, ``by`` None); the recipients' reports are on the ``sent_messages`` row.
    A refusal's ``by`` is the refuser's name as we call them (a contact's label, else the
    room's name for them).
    """
    events: list[Event] = []
    relay = conn.execute(
        "SELECT code, reason FROM refused_ops WHERE op_id = ?", (msg_id,)
    ).fetchone()
    if relay is not None:
        events.append(Event(Step.REFUSED, reason=f"{relay[0]}: {relay[1]}"))
    row = conn.execute(
        "SELECT receipt, refused_by, refusal, room_id, seq FROM sent_messages WHERE msg_id = ?",
        (msg_id,),
    ).fetchone()
    out = conn.execute("SELECT state FROM outbox WHERE op_id = ?", (msg_id,)).fetchone()
    if (out is not None and out[0] == "sent") or (row is not None and row[4] is not None):
        events.append(Event(Step.POSTED))
    if row is not None:
        by = None if row[1] is None else member_label(conn, str(row[3]), str(row[1]))
        reported = _reported(row[0], by, row[2])
        if reported.state is DeliveryState.REFUSED:
            events.append(Event(Step.REFUSED, by=reported.by, reason=reported.reason))
        elif reported.state is not DeliveryState.QUEUED:
            events.append(receipt_event(reported.state.value))
    return settle(events)


def delivery_state(conn: sqlite3.Connection, msg_id: str) -> tuple[str, str | None]:
    """queued → sent (the relay sequenced it) → delivered → read, never backwards; or refused.

    Returns the state and, for ``refused``, why (see :func:`delivery`).
    """
    found = delivery(conn, msg_id)
    return found.state.value, found.reason


def recent_sent(conn: sqlite3.Connection, limit: int) -> list[SentRow]:
    """The ``limit`` messages we sent last, newest first."""
    return sent_page(conn, limit)


def sent_page(
    conn: sqlite3.Connection, limit: int, *, since: float | None = None,
    before: tuple[float, str] | None = None,
) -> list[SentRow]:
    """Up to ``limit`` messages we sent, newest first (by time, then id, so messages sent in
    the same instant are neither skipped nor repeated across pages).

    Args:
        limit: the most rows returned.
        since: only those sent at or after this (wall-clock seconds).
        before: only those strictly older than this ``(created_at, msg_id)`` (a page's last
            row: see :func:`sent_position`).
    """
    where: list[str] = ["1 = 1"]
    args: list[float | str] = []
    if since is not None:
        where.append("created_at >= ?")
        args.append(since)
    if before is not None:
        where.append("(created_at < ? OR (created_at = ? AND msg_id < ?))")
        args += [before[0], before[0], before[1]]
    rows = conn.execute(
        "SELECT msg_id, to_label, kind, created_at, substr(coalesce(text, ''), 1, ?) "
        f"FROM sent_messages WHERE {' AND '.join(where)} "
        "ORDER BY created_at DESC, msg_id DESC LIMIT ?",
        (TEXT_START, *args, limit),
    ).fetchall()
    return [SentRow(str(r[0]), str(r[1]), str(r[2]), float(r[3]), str(r[4])) for r in rows]


def sent_position(conn: sqlite3.Connection, msg_id: str) -> tuple[float, str] | None:
    """Where ``msg_id`` sits in :func:`sent_page`'s order, or None if we sent no such message."""
    row = conn.execute(
        "SELECT created_at, msg_id FROM sent_messages WHERE msg_id = ?", (msg_id,)
    ).fetchone()
    return None if row is None else (float(row[0]), str(row[1]))
