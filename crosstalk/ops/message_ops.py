"""``send`` and ``read``: a message to a person, and what is waiting for us.

``send`` resolves the address to a room, has that room's actor seal the op and commit it to the
outbox (``queued``), then waits briefly for the relay to sequence it (``sent``). ``read`` hands
out held messages, marking them read; the sender shown is *our* name for the signing key, never
a name the sender wrote.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import attrs
import nacl.utils
import trio
from cattrs.gen import make_dict_unstructure_fn, override

from crosstalk.actors.control import OpTable
from crosstalk.actors.room import Applied
from crosstalk.actors.router import WatchSent
from crosstalk.core.ration import Ration
from crosstalk.core.triage import Intent, Kind
from crosstalk.daemon import Daemon
from crosstalk.errors import CrosstalkError, NotAMember, UnknownPeer, UsageError
from crosstalk.ops.room_admin_ops import find_room
from crosstalk.slices import build_slice, needs_transcript
from crosstalk.store.attention import load_ration_stamps, save_ration_stamps
from crosstalk.store.rooms import contact_named, direct_room_with
from crosstalk.store.sessions import current_transcript
from crosstalk.wire.converter import converter, unstructure
from crosstalk.wire.room_ops import MAX_TEXT, MessageOp, Receipt, Slice

log = logging.getLogger(__name__)

SENT_WAIT = 2.0
LOCAL_ROOM = "local"  # held messages that never crossed a relay: posts and me/session
STATES = ("queued", "sent", "delivered", "read")


@attrs.frozen
class SendParams:
    to: str
    text: str
    intent: str = "fyi"
    kind: str = "message"  # or "handoff" (a work item, usually with slices)
    thread: str | None = None
    reply_to: str | None = None
    session: str | None = None  # the sending session, shown to the recipient
    slices: list[str] = attrs.Factory(list)  # diff[:REF] | file:PATH | turns[:N] | note:TEXT
    cwd: str | None = None  # where file and diff slices are taken from
    transcript: str | None = None  # for turns slices
    unprompted: bool = False  # self-initiated: rationed, and must say why
    because: str | None = None


@attrs.frozen
class AnswerParams:
    to: str
    correlation: str
    text: str
    session: str | None = None


@attrs.frozen
class SliceParams:
    id: str
    index: int = 0


@attrs.frozen
class SliceReply:
    kind: str
    label: str
    bytes: int
    sha256: str
    content: str
    truncated: bool


@attrs.frozen
class SentParams:
    limit: int = 50


@attrs.frozen
class SentView:
    id: str
    to: str
    kind: str
    state: str
    ts: float


@attrs.frozen
class SentReply:
    sent: list[SentView]


@attrs.frozen
class PostParams:
    text: str
    intent: str = "fyi"
    source: str = "local"


@attrs.frozen
class PostReply:
    posted_as: str
    id: str


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


@attrs.frozen
class Address:
    """Where a message goes: a room, and optionally one session or project on the far side."""

    room_id: str
    label: str  # how we name the recipient(s) in replies
    to: str | None = None  # their session or project name


def _resolve(conn: sqlite3.Connection, to: str) -> Address:
    """``person``, ``person/session``, ``person/project`` or ``#room``."""
    if to.startswith("#"):
        named = find_room(conn, to)
        if named.state != "joined":
            raise NotAMember(f"You have not joined #{named.name}; accept it first.")
        return Address(named.room_id, f"#{named.name}")
    person, _, where = to.partition("/")
    contact = contact_named(conn, person)
    direct = direct_room_with(conn, contact.fingerprint)
    if direct is None:
        raise UnknownPeer(f"You share no room with {contact.label} yet.")
    label = f"{contact.label}/{where}" if where else contact.label
    return Address(direct.room_id, label, where or None)


def _for_session(conn: sqlite3.Connection, session: str | None) -> tuple[str, list[str]]:
    """A WHERE clause picking the messages a session may read (all of them without one)."""
    if session is None:
        return "", []
    row = conn.execute("SELECT project FROM sessions WHERE name = ?", (session,)).fetchone()
    names = [session] + ([Path(row[0]).name] if row and row[0] else [])
    marks = ", ".join("?" for _ in names)
    return f" AND (h.target_session IS NULL OR h.target_session IN ({marks}))", names


def take_messages(
    conn: sqlite3.Connection, *, include_read: bool, session: str | None = None
) -> tuple[list[MessageView], dict[str, list[str]]]:
    """Held messages (marked read now) and, per room, the ids to send read receipts for."""
    where, args = _for_session(conn, session)
    rows = conn.execute(
        "SELECT h.message_id, h.sender, h.body, h.received_at, r.name, c.label, h.room_id, "
        "h.read_at FROM held_messages h LEFT JOIN rooms r ON r.room_id = h.room_id "
        "LEFT JOIN contacts c ON c.fingerprint = h.sender WHERE 1 = 1"
        + ("" if include_read else " AND h.read_at IS NULL")
        + where
        + " ORDER BY h.received_at, h.rowid",
        args,
    ).fetchall()
    now = time.time()
    conn.executemany(
        "UPDATE held_messages SET read_at = ? WHERE message_id = ? AND read_at IS NULL",
        [(now, r[0]) for r in rows],
    )
    receipts: dict[str, list[str]] = {}
    for r in rows:
        if r[7] is None and r[6] != LOCAL_ROOM:
            receipts.setdefault(r[6], []).append(r[0])
    return [_view(*r[:6]) for r in rows], receipts


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
        slices=[
            SliceView(i, str(sl["kind"]), str(sl["label"]), len(str(sl["content"]).encode()))
            for i, sl in enumerate(op.get("slices", []))
        ],
    )


def hold_message(conn: sqlite3.Connection, applied: Applied, *, me: str) -> None:
    """Applier: a message that arrived in a room is held for our sessions (once, by op id).

    Our own messages (replayed to us after a reconnect, or sent from another of our machines)
    are not incoming: they are never held.
    """
    op = applied.op
    if not isinstance(op, MessageOp) or applied.sender == me:
        return
    body = json.dumps({**unstructure(op), "relay_ts": applied.relay_ts}, sort_keys=True)
    conn.execute(
        "INSERT OR IGNORE INTO held_messages (message_id, room_id, sender, target_session, "
        "target_project, intent, body, received_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
        (applied.op_id, applied.room_id, applied.sender, op.to, op.intent.value, body, time.time()),
    )


def apply_receipt(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a recipient reports delivered/read; states only move forward."""
    op = applied.op
    if not isinstance(op, Receipt) or op.state not in ("delivered", "read"):
        return
    for msg_id in op.msg_ids:
        conn.execute(
            "UPDATE sent_messages SET receipt = ? WHERE msg_id = ? AND room_id = ? "
            "AND (receipt IS NULL OR receipt = 'delivered')",
            (op.state, msg_id, applied.room_id),
        )


def delivery_state(conn: sqlite3.Connection, msg_id: str) -> str:
    """queued → sent (the relay sequenced it) → delivered → read, never backwards."""
    row = conn.execute("SELECT receipt FROM sent_messages WHERE msg_id = ?", (msg_id,)).fetchone()
    if row and row[0]:
        return str(row[0])
    out = conn.execute("SELECT state FROM outbox WHERE op_id = ?", (msg_id,)).fetchone()
    return "sent" if out and out[0] == "sent" else "queued"


def hold_local(
    conn: sqlite3.Connection, *, msg_id: str, sender: str, op: MessageOp, now: float
) -> None:
    """A message that never crossed a relay (a post, or to our own session)."""
    body = json.dumps({**unstructure(op), "relay_ts": now}, sort_keys=True)
    conn.execute(
        "INSERT INTO held_messages (message_id, room_id, sender, target_session, "
        "target_project, intent, body, received_at) VALUES (?, ?, ?, ?, NULL, ?, ?, ?)",
        (msg_id, LOCAL_ROOM, sender, op.to, op.intent.value, body, now),
    )


def sent_views(conn: sqlite3.Connection, limit: int) -> SentReply:
    rows = conn.execute(
        "SELECT msg_id, to_label, kind, created_at FROM sent_messages "
        "ORDER BY created_at DESC LIMIT ?",
        (max(1, min(limit, 1000)),),
    ).fetchall()
    return SentReply([SentView(r[0], r[1], r[2], delivery_state(conn, r[0]), r[3]) for r in rows])


def take_slice(conn: sqlite3.Connection, msg_id: str, index: int) -> SliceReply:
    row = conn.execute("SELECT body FROM held_messages WHERE message_id = ?", (msg_id,)).fetchone()
    if row is None:
        raise UsageError(f"There is no message {msg_id!r} here.")
    slices = json.loads(row[0]).get("slices", [])
    if not 0 <= index < len(slices):
        raise UsageError(f"Message {msg_id} has {len(slices)} slice(s); there is no {index}.")
    sl = slices[index]
    content = str(sl["content"])
    return SliceReply(
        str(sl["kind"]),
        str(sl["label"]),
        len(content.encode()),
        str(sl["sha256"]),
        content,
        bool(sl.get("truncated", False)),
    )


async def _build_slices(daemon: Daemon, params: SendParams) -> tuple[Slice, ...]:
    if not params.slices:
        return ()
    cwd = Path(params.cwd or ".")
    transcript = params.transcript
    if transcript is None and needs_transcript(params.slices):  # the session's, as recorded
        transcript = await daemon.store.read(
            lambda c: current_transcript(c, session=params.session, cwd=params.cwd)
        )

    def build() -> tuple[Slice, ...]:
        return tuple(build_slice(spec, cwd=cwd, transcript=transcript) for spec in params.slices)

    return await trio.to_thread.run_sync(build)


def _spend_ration(conn: sqlite3.Connection, recipient: str, reason: str | None, now: float) -> None:
    ration = Ration(sent=load_ration_stamps(conn))
    ration.spend(recipient, reason, now)  # raises needs_reason / ration_spent
    ration.forget_before(now)
    save_ration_stamps(conn, ration.stamps())


async def deliver(
    daemon: Daemon, params: SendParams, *, kind: Kind, correlation: str | None = None
) -> SendReply:
    """Seal and queue one message (or hold it locally for ``me/SESSION``); wait briefly for sent."""
    if not params.text.strip():
        raise UsageError("There is nothing to send: the message is empty.")
    if len(params.text) > MAX_TEXT:
        raise UsageError(f"The message is longer than {MAX_TEXT} characters; attach it as a slice.")
    intent = Intent.parse(params.intent)
    me = daemon.require_identity()
    slices = await _build_slices(daemon, params)
    op_id = nacl.utils.random(16).hex()
    now = time.time()
    op = MessageOp(
        msg_id=op_id,
        text=params.text,
        intent=intent,
        kind=kind,
        from_label=me.label,
        from_session=params.session,
        thread=params.thread,
        reply_to=params.reply_to,
        correlation=correlation,
        sent_at=now,
        slices=slices,
        unprompted_because=params.because if params.unprompted else None,
    )
    if params.to.startswith("me/"):  # our own other session: no relay at all
        local = attrs.evolve(op, to=params.to.removeprefix("me/") or None)
        await daemon.store.write(
            lambda c: hold_local(c, msg_id=op_id, sender=daemon.keys.fingerprint, op=local, now=now)
        )
        return SendReply(id=op_id, state="delivered", to=[params.to])
    address = await daemon.store.read(lambda c: _resolve(c, params.to))
    if params.unprompted:
        await daemon.store.write(lambda c: _spend_ration(c, address.label, params.because, now))
    assert daemon.router is not None
    sent_send, sent_receive = trio.open_memory_channel[int](1)
    await daemon.router.send(WatchSent(op_id, sent_send))
    await daemon.send_op(address.room_id, attrs.evolve(op, to=address.to), op_id=op_id)
    await daemon.store.write(
        lambda c: c.execute(
            "INSERT INTO sent_messages (msg_id, room_id, to_label, kind, chars, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (op_id, address.room_id, address.label, kind.value, len(params.text), now),
        )
    )
    with trio.move_on_after(SENT_WAIT):
        await sent_receive.receive()
    state = await daemon.store.read(lambda c: delivery_state(c, op_id))
    return SendReply(id=op_id, state=state, to=[address.label])


async def send_receipts(daemon: Daemon, state: str, by_room: dict[str, list[str]]) -> None:
    """Tell senders their messages were delivered or read (one op per room)."""
    for room_id, ids in by_room.items():
        try:
            await daemon.send_op(room_id, Receipt(state, tuple(ids)))
        except CrosstalkError as exc:  # a room we have since left: the receipt has nowhere to go
            log.info("no %s receipt for room %s: %s", state, room_id, exc.message)


def register(ops: OpTable, daemon: Daemon) -> None:
    daemon.appliers.append(
        lambda conn, applied: hold_message(conn, applied, me=daemon.keys.fingerprint)
    )
    daemon.appliers.append(apply_receipt)

    async def delivered(applied: list[Applied]) -> None:
        by_room: dict[str, list[str]] = {}
        me = daemon.keys.fingerprint
        for entry in applied:
            if isinstance(entry.op, MessageOp) and entry.sender != me:
                by_room.setdefault(entry.room_id, []).append(entry.op_id)
        await send_receipts(daemon, "delivered", by_room)

    daemon.applied_listeners.append(delivered)

    async def send(params: SendParams) -> SendReply:
        kind = Kind.HANDOFF if params.kind == "handoff" else Kind.MESSAGE
        return await deliver(daemon, params, kind=kind)

    async def answer(params: AnswerParams) -> SendReply:
        message = SendParams(
            to=params.to, text=params.text, intent="question", session=params.session
        )
        return await deliver(daemon, message, kind=Kind.ANSWER, correlation=params.correlation)

    async def read(params: ReadParams) -> ReadReply:
        messages, receipts = await daemon.store.write(
            lambda c: take_messages(c, include_read=params.all, session=params.session)
        )
        await send_receipts(daemon, "read", receipts)
        return ReadReply(messages)

    async def read_slice(params: SliceParams) -> SliceReply:
        return await daemon.store.read(lambda c: take_slice(c, params.id, params.index))

    async def post(params: PostParams) -> PostReply:
        intent = Intent.parse(params.intent)
        source = params.source.strip() or "local"
        msg_id = nacl.utils.random(16).hex()
        now = time.time()
        op = MessageOp(
            msg_id=msg_id,
            text=params.text,
            intent=intent,
            kind=Kind.NOTICE,
            from_label=source,
            sent_at=now,
        )
        await daemon.store.write(
            lambda c: hold_local(c, msg_id=msg_id, sender=f"post:{source}", op=op, now=now)
        )
        return PostReply(posted_as=f"post:{source}", id=msg_id)

    ops.add("send", SendParams, send)
    ops.add("answer", AnswerParams, answer)
    ops.add("read", ReadParams, read)
    ops.add("read_slice", SliceParams, read_slice)

    async def sent(params: SentParams) -> SentReply:
        return await daemon.store.read(lambda c: sent_views(c, params.limit))

    ops.add("post", PostParams, post)
    ops.add("sent", SentParams, sent)
