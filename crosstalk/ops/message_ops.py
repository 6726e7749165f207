"""``send`` and ``read``: a message to a person, and what is waiting for us.

``send`` resolves the address to a room, has that room's actor seal the op and commit it to the
outbox (``queued``), then waits briefly for the relay to sequence it (``sent``). ``read`` hands
out held messages, marking them read; the sender shown is *our* name for the signing key, never
a name the sender wrote.
"""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import attrs
import nacl.utils
import trio
from cattrs.gen import make_dict_unstructure_fn, override

from crosstalk.actors.control import OpTable
from crosstalk.actors.room import Applied
from crosstalk.actors.router import WatchSent
from crosstalk.core.triage import Intent
from crosstalk.daemon import Daemon
from crosstalk.errors import UnknownPeer, UsageError
from crosstalk.store.rooms import contact_named, direct_room_with
from crosstalk.wire.converter import converter, unstructure
from crosstalk.wire.room_ops import MAX_TEXT, MessageOp

SENT_WAIT = 2.0


@attrs.frozen
class SendParams:
    to: str
    text: str
    intent: str = "fyi"
    thread: str | None = None
    reply_to: str | None = None


@attrs.frozen
class SendReply:
    id: str
    state: str
    to: list[str]


@attrs.frozen
class ReadParams:
    all: bool = False
    session: str | None = None


@attrs.frozen
class SliceView:
    index: int
    kind: str
    label: str
    bytes: int


@attrs.frozen
class MessageView:
    id: str
    from_: str
    session: str | None
    room: str
    intent: str
    kind: str
    text: str
    thread: str | None
    reply_to: str | None
    correlation: str | None
    ts: float
    slices: list[SliceView]


# "from" is a keyword in Python: the field is ``from_`` and travels as "from".
converter.register_unstructure_hook(
    MessageView,
    make_dict_unstructure_fn(MessageView, converter, from_=override(rename="from")),
)


@attrs.frozen
class ReadReply:
    messages: list[MessageView]


def _resolve(conn: sqlite3.Connection, to: str) -> tuple[str, str]:
    """(room id, label) for a person's room of two."""
    contact = contact_named(conn, to)
    room = direct_room_with(conn, contact.fingerprint)
    if room is None:
        raise UnknownPeer(f"You share no room with {contact.label} yet.")
    return room.room_id, contact.label


def _take_messages(conn: sqlite3.Connection, *, include_read: bool) -> list[MessageView]:
    rows = conn.execute(
        "SELECT h.message_id, h.sender, h.body, h.received_at, r.name, c.label "
        "FROM held_messages h LEFT JOIN rooms r ON r.room_id = h.room_id "
        "LEFT JOIN contacts c ON c.fingerprint = h.sender "
        + ("" if include_read else "WHERE h.read_at IS NULL ")
        + "ORDER BY h.received_at, h.rowid"
    ).fetchall()
    now = time.time()
    conn.executemany(
        "UPDATE held_messages SET read_at = ? WHERE message_id = ? AND read_at IS NULL",
        [(now, r[0]) for r in rows],
    )
    return [_view(*r) for r in rows]


def _view(
    msg_id: str, sender: str, body: str, received: float, room: str | None, label: str | None
) -> MessageView:
    op: dict[str, Any] = json.loads(body)
    return MessageView(
        id=msg_id,
        from_=label or sender,  # our name for the verified signer, never the sender's own
        session=op.get("from_session"),
        room=room or "",
        intent=op.get("intent", "fyi"),
        kind=op.get("kind", "message"),
        text=op.get("text", ""),
        thread=op.get("thread"),
        reply_to=op.get("reply_to"),
        correlation=op.get("correlation"),
        ts=float(op.get("relay_ts", received)),
        slices=[],
    )


def hold_message(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a message that arrived in a room is held for our sessions (once, by op id)."""
    op = applied.op
    if not isinstance(op, MessageOp):
        return
    body = json.dumps({**unstructure(op), "relay_ts": applied.relay_ts}, sort_keys=True)
    conn.execute(
        "INSERT OR IGNORE INTO held_messages (message_id, room_id, sender, target_session, "
        "target_project, intent, body, received_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
        (applied.op_id, applied.room_id, applied.sender, op.to, op.intent.value, body, time.time()),
    )


def register(ops: OpTable, daemon: Daemon) -> None:
    async def send(params: SendParams) -> SendReply:
        if not params.text.strip():
            raise UsageError("There is nothing to send: the message is empty.")
        if len(params.text) > MAX_TEXT:
            raise UsageError(
                f"The message is longer than {MAX_TEXT} characters; attach it as a slice."
            )
        intent = Intent.parse(params.intent)
        me = daemon.require_identity()
        room_id, label = await daemon.store.read(lambda c: _resolve(c, params.to))
        assert daemon.router is not None
        op_id = nacl.utils.random(16).hex()
        op = MessageOp(
            msg_id=op_id,
            text=params.text,
            intent=intent,
            from_label=me.label,
            thread=params.thread,
            reply_to=params.reply_to,
            sent_at=time.time(),
        )
        sent_send, sent_receive = trio.open_memory_channel[int](1)
        await daemon.router.send(WatchSent(op_id, sent_send))
        await daemon.send_op(room_id, op, op_id=op_id)
        state = "queued"
        with trio.move_on_after(SENT_WAIT):
            await sent_receive.receive()
            state = "sent"
        return SendReply(id=op_id, state=state, to=[label])

    async def read(params: ReadParams) -> ReadReply:
        messages = await daemon.store.write(lambda c: _take_messages(c, include_read=params.all))
        return ReadReply(messages)

    daemon.appliers.append(hold_message)
    ops.add("send", SendParams, send)
    ops.add("read", ReadParams, read)
