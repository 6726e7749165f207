"""What the relay link keeps in ``state.db``: its SQL, one function per step, each on an open
connection (the caller's transaction; :class:`crosstalk.actors.relay_link_store.SqliteLinkStore`
runs each in its own ``Store.write``/``read``).

Tables: ``relay_cursors`` and ``relay_inbound`` (schema v2), ``outbox`` (v1: a row is ``queued``
until the relay sequences it, then ``sent`` with its seq), and two settings: the pinned relay keys
(``relay.pinned_keys``, ``{url: base64 key}``) and this home's device id (``relay.device``).

A ``sent`` outbox row and an applied ``relay_inbound`` row are trimmed moments later
(crosstalk/store/retention.py ``trim``), so what must outlive them is written elsewhere when the
relay sequences a post: a message's seq on its ``sent_messages`` row (the ``sent`` step of its
delivery state, migration 26).
"""

from __future__ import annotations

import base64
import secrets
import sqlite3
from collections.abc import Sequence

import attrs

from crosstalk.core.link import OutboxItem
from crosstalk.errors import CrosstalkError, DamagedState, RelayKeyMismatch, UnknownRoom
from crosstalk.store.settings import RELAY_KEYS, get_setting, set_setting
from crosstalk.wire import relay as w

RELAY_DEVICE = "relay.device"
"""This home's device id for the relay: random, made once, never changed."""


@attrs.frozen
class LinkSnapshot:
    """What the link loads when an instance starts."""

    pinned_key: bytes | None
    cursors: dict[str, int]
    outbox: list[OutboxItem]
    outbox_through: int = 0  # the highest outbox id ever committed (see ``LinkBoss``)


def pinned_keys(conn: sqlite3.Connection) -> dict[str, str]:
    """The pinned relay keys, ``{url: base64 key}``."""
    value = get_setting(conn, RELAY_KEYS)
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise DamagedState(f"the setting {RELAY_KEYS!r} in state.db is not a map of keys.")
    return {url: str(key) for url, key in value.items()}


def load(conn: sqlite3.Connection, url: str) -> LinkSnapshot:
    """What a link for ``url`` starts from: its pinned key, the cursors, the queued posts."""
    pinned = pinned_keys(conn).get(url)
    cursors = dict(conn.execute("SELECT room_id, seq FROM relay_cursors").fetchall())
    rows = conn.execute(
        "SELECT id, room_id, op_id, frame, pinned FROM outbox WHERE state = 'queued' ORDER BY id"
    ).fetchall()
    outbox = [
        OutboxItem(id, room, op_id, bytes(body), bool(pinned))
        for id, room, op_id, body, pinned in rows
    ]
    key = base64.b64decode(pinned) if pinned is not None else None
    # AUTOINCREMENT keeps the highest id ever given here, even once its row is trimmed.
    through = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'outbox'").fetchone()
    return LinkSnapshot(key, cursors, outbox, int(through[0]) if through else 0)


def queue_post(
    conn: sqlite3.Connection, room: str, op_id: str, body: bytes, now: float,
    *, pinned: bool = False,
) -> OutboxItem | None:
    """Put a post in the outbox; ``None`` if that op id was already sent (see ``LinkStore``).
    ``pinned``: the op carries keys (see :class:`OutboxItem`)."""
    try:
        conn.execute(
            "INSERT INTO outbox (op_id, room_id, frame, created_at, pinned) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (op_id) DO NOTHING",
            (op_id, room, body, now, int(pinned)),
        )
    except sqlite3.IntegrityError:
        raise UnknownRoom(f"There is no room {room!r} here to post to.") from None
    row = conn.execute(
        "SELECT id, room_id, frame, state FROM outbox WHERE op_id = ?", (op_id,)
    ).fetchone()
    id_, stored_room, stored_body, state = row
    if stored_room != room or bytes(stored_body) != body:
        raise UnknownRoom(f"The op id {op_id!r} was already queued with other content.")
    return OutboxItem(id_, room, op_id, body, pinned) if state == "queued" else None


def replace_queued_body(conn: sqlite3.Connection, item_id: int, body: bytes) -> bool:
    """A queued post sealed anew (crosstalk.actors.room_reseal); ``False`` if it is no longer
    queued."""
    cur = conn.execute(
        "UPDATE outbox SET frame = ? WHERE id = ? AND state = 'queued'", (body, item_id)
    )
    return cur.rowcount == 1


def post_state(conn: sqlite3.Connection, op_id: str) -> str | None:
    """Where our post ``op_id`` stands: ``queued``, ``sent`` (sequenced), or None when the
    outbox does not hold it (refused, never queued, or sequenced and trimmed: a message keeps
    its ``sent`` on its ``sent_messages`` row; other ops are trimmed only after a grace, well
    after anyone waiting on them looked)."""
    row = conn.execute(
        "SELECT coalesce((SELECT state FROM outbox WHERE op_id = :op), "
        "(SELECT 'sent' FROM sent_messages WHERE msg_id = :op AND seq IS NOT NULL))",
        {"op": op_id},
    ).fetchone()
    return None if row[0] is None else str(row[0])


def mark_sent(conn: sqlite3.Connection, item: OutboxItem, seq: int, ts: float = 0.0) -> bool:
    """Record the relay's seq and time for our post; ``True`` if it also moved the room's
    cursor."""
    conn.execute(
        "UPDATE outbox SET state = 'sent', seq = ?, relay_ts = ? WHERE id = ?", (seq, ts, item.id)
    )
    # A message's `sent` outlives the outbox row, which is trimmed soon (module docstring).
    conn.execute(
        "UPDATE sent_messages SET seq = ? WHERE msg_id = ? AND room_id = ?",
        (seq, item.op_id, item.room),
    )
    # The relay never pushes our own post back to us, so when it is the next op after our
    # cursor the cursor moves past it here; otherwise our own ops would sit unacknowledged in
    # our backlog until someone else spoke. With a gap (others' ops still on their way) the
    # cursor waits: their arrival moves it past ours.
    moved = conn.execute(
        "UPDATE relay_cursors SET seq = ? WHERE room_id = ? AND seq = ?",
        (seq, item.room, seq - 1),
    )
    return moved.rowcount > 0


def commit_inbound(conn: sqlite3.Connection, op: w.Op, received_at: float) -> bool:
    """Keep an inbound op and advance its room's cursor; ``True`` if it is new here."""
    cursor = conn.execute(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (room_id, op_id) DO NOTHING",
        (op.room, op.op_id, op.seq, op.sender, op.body, op.ts, received_at),
    )
    conn.execute(
        "INSERT INTO relay_cursors (room_id, seq) VALUES (?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET seq = max(seq, excluded.seq)",
        (op.room, op.seq),
    )
    return cursor.rowcount > 0


def commit_inbound_many(conn: sqlite3.Connection, ops: Sequence[w.Op], received_at: float) -> None:
    """Keep several inbound ops (in order) and advance their rooms' cursors."""
    conn.executemany(
        "INSERT INTO relay_inbound (room_id, op_id, seq, sender, body, relay_ts, received_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (room_id, op_id) DO NOTHING",
        [(op.room, op.op_id, op.seq, op.sender, op.body, op.ts, received_at) for op in ops],
    )
    top: dict[str, int] = {}
    for op in ops:
        top[op.room] = max(op.seq, top.get(op.room, 0))
    conn.executemany(
        "INSERT INTO relay_cursors (room_id, seq) VALUES (?, ?) "
        "ON CONFLICT (room_id) DO UPDATE SET seq = max(seq, excluded.seq)",
        list(top.items()),
    )


def pin_relay_key(conn: sqlite3.Connection, url: str, key: bytes) -> None:
    """Pin ``key`` for ``url``; a different key already pinned there is refused."""
    pins = pinned_keys(conn)
    encoded = base64.b64encode(key).decode()
    if pins.get(url, encoded) != encoded:
        raise RelayKeyMismatch(f"A different relay key is already pinned for {url}.")
    pins[url] = encoded
    set_setting(conn, RELAY_KEYS, dict(sorted(pins.items())))


def drop_post(
    conn: sqlite3.Connection, item: OutboxItem, error: CrosstalkError, now: float
) -> None:
    """Out of the outbox, and the refusal kept (``refused_ops``) so ``sent`` can say why."""
    conn.execute("DELETE FROM outbox WHERE id = ?", (item.id,))
    conn.execute(
        "INSERT OR IGNORE INTO refused_ops (op_id, room_id, code, reason, refused_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (item.op_id, item.room, error.code, error.message, now),
    )


def track_room(conn: sqlite3.Connection, room: str) -> None:
    """Start a cursor (at 0) for ``room`` unless it has one."""
    conn.execute(
        "INSERT INTO relay_cursors (room_id, seq) VALUES (?, 0) ON CONFLICT (room_id) DO NOTHING",
        (room,),
    )


def forget_room(conn: sqlite3.Connection, room: str) -> None:
    """Drop ``room``'s cursor."""
    conn.execute("DELETE FROM relay_cursors WHERE room_id = ?", (room,))


def get_or_make_device_id(conn: sqlite3.Connection) -> str:
    """This home's device id, made (16 hex digits) on first call."""
    value = get_setting(conn, RELAY_DEVICE)
    if isinstance(value, str) and value:
        return value
    made = secrets.token_hex(8)
    set_setting(conn, RELAY_DEVICE, made)
    return made
