"""``send``, ``answer``, ``post`` and ``sent``: a message to a person, and how far it got.

``send`` resolves the address to a room, has that room's actor seal the op and commit it to the
outbox (``queued``), then waits briefly for the relay to sequence it (``sent``). Limits are
checked before anything is queued (``too_large``), and the reply names any slice that was cut to
its cap (``truncated``). A post the relay refuses for good is ``refused`` with the relay's
reason. Messages that cross no relay (``post``, ``me/SESSION``) are held and then told to the
``local_listeners`` (the gate, ``watch``, the inbox push) exactly as a room's arrivals are.
``answer`` answers only a question someone asked us (``unknown_message`` otherwise). Reading is
:mod:`crosstalk.features.read.ops`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import sqlite3
import time
from pathlib import Path
from typing import Protocol

import attrs
import nacl.utils
import trio

from crosstalk.actors.router import WatchSent
from crosstalk.core.addressing import check_where
from crosstalk.core.delivery import DeliveryState
from crosstalk.core.gate_routing import live_sessions
from crosstalk.core.levels import local_key
from crosstalk.core.ration import Ration
from crosstalk.core.room import Applied
from crosstalk.core.triage import Intent, Kind
from crosstalk.errors import (
    NotAMember,
    RemoteProtocolError,
    StorageFull,
    TooLarge,
    UnknownMessage,
    UnknownPeer,
    UsageError,
)
from crosstalk.features.caps import Identified, Routed, SendsOps, Stored, TellsLocal
from crosstalk.features.feature import Plugs, op
from crosstalk.features.read.ops import SHORT_ID, find_held
from crosstalk.features.rooms.views import find_room
from crosstalk.slices.build import (
    build_slice,
    needs_project,
    needs_transcript,
    project_root,
    slice_root,
)
from crosstalk.store import messages
from crosstalk.store.attention import load_ration_stamps, save_ration_stamps
from crosstalk.store.gate import LOCAL_ROOM
from crosstalk.store.presence import peer_sessions
from crosstalk.store.rooms import contact_named, direct_room_with
from crosstalk.store.sessions import current_transcript, list_sessions, slice_projects
from crosstalk.store.threads import reply_target
from crosstalk.wire.control.params import AnswerParams, PostParams, SendParams, SentParams
from crosstalk.wire.control.replies.messages import PostReply, SendReply, SentReply, SentView
from crosstalk.wire.control.table import ANSWER, POST, SEND, SENT
from crosstalk.wire.converter import unstructure
from crosstalk.wire.relay_log import MAX_OP_BODY
from crosstalk.wire.room_ops import MAX_TEXT, MessageOp, Receipt, Slice, encode_op

log = logging.getLogger(__name__)

class Host(Stored, Identified, SendsOps, Routed, TellsLocal, Protocol):
    """What sending uses: the store, who we are, a room to seal into, the router to watch for
    ``sent``, and the local listeners for messages that cross no relay."""


SENT_WAIT = 2.0
MAX_SOURCE = 64  # a post's source shows where a sender's name does (a label is 64)
# Building the slices (reading files, running git) may take this long. A send answers well
# inside its clients' 30 s, so a slow slice fails the send, with nothing queued, instead of the
# client giving up (daemon_unreachable) on a send that is then delivered anyway.
SLICE_DEADLINE = 10.0
STATES = tuple(state.value for state in DeliveryState)
#: The most rows one ``sent`` page holds; ``next`` pages through the rest.
MAX_SENT_PAGE = 1000
#: What sealing adds to an op's JSON on its way to the relay: framing header (7), nonce (24),
#: signature (64) and AEAD tag (16), rounded up.
SEAL_OVERHEAD = 128


@attrs.frozen
class Address:
    """Where a message goes: a room, and optionally one session or project on the far side."""

    room_id: str
    label: str  # how we name the recipient(s) in replies
    to: str | None = None  # their session or project name


def resolve(conn: sqlite3.Connection, to: str) -> Address:
    """``person``, ``person/session``, ``person/project`` or ``#room``.

    ``person/where`` must name a session the person published to a room we share, or the
    project one of them works in (:mod:`crosstalk.core.addressing`): ``unknown_session``
    otherwise, before anything is queued.
    """
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
    if where:
        check_where(contact.label, where, peer_sessions(conn).get(contact.fingerprint, []))
    label = f"{contact.label}/{where}" if where else contact.label
    return Address(direct.room_id, label, where or None)


def resolve_own(conn: sqlite3.Connection, where: str, *, now: float) -> str | None:
    """``me/where``: one of our sessions live at ``now``, or the project one works in (None for
    a bare ``me/``: whichever session is next); ``unknown_session`` otherwise."""
    if where:
        check_where(None, where, live_sessions(list_sessions(conn), now))
    return where or None


def hold_message(conn: sqlite3.Connection, applied: Applied, *, me: str) -> None:
    """Applier: a message that arrived in a room is held for our sessions (once, by op id).

    Our own messages (replayed to us after a reconnect, or sent from another of our machines)
    are not incoming: they are never held.
    """
    op = applied.op
    if not isinstance(op, MessageOp) or applied.sender == me:
        return
    body = messages.body_json({**unstructure(op), "relay_ts": applied.relay_ts})
    messages.hold(
        conn, message_id=applied.op_id, room_id=applied.room_id, sender=applied.sender,
        to=op.to, intent=op.intent.value, body=body, received_at=time.time(), once=True,
    )


def apply_receipt(conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a recipient reports delivered/read; states only move forward."""
    op = applied.op
    if not isinstance(op, Receipt):
        return
    try:
        for msg_id in op.msg_ids:
            messages.record_receipt(conn, applied.room_id, msg_id, op.state)
    except RemoteProtocolError as exc:  # a peer's receipt naming no state it can report
        log.info("room %s: receipt from %s ignored: %s", applied.room_id, applied.sender, exc)


def apply_refusal(conn: sqlite3.Connection, applied: Applied, *, me: str) -> None:
    """Applier: a recipient's gate refused a message of ours (its automatic refusal names it in
    ``reply_to``): the message is refused, by them, whatever receipts say. ``me`` is our
    fingerprint (a refusal we sent, from another machine of ours, is not about our message)."""
    op = applied.op
    if not isinstance(op, MessageOp) or applied.sender == me or op.reply_to is None:
        return
    if not (op.kind is Kind.REFUSAL or (op.kind is Kind.ANSWER and op.refused)):
        return  # an older peer refused with an answer marked refused: the same news
    kind = conn.execute(
        "SELECT kind FROM sent_messages WHERE msg_id = ? AND room_id = ?",
        (op.reply_to, applied.room_id),
    ).fetchone()
    what = f"{kind[0]}s" if kind and kind[0] else "messages"
    label = messages.member_label(conn, applied.room_id, applied.sender)
    messages.record_refusal(
        conn, applied.room_id, op.reply_to, by=applied.sender,
        reason=f"{label} refused it: their attention settings take no {what} from you",
    )


def hold_local(
    conn: sqlite3.Connection, *, msg_id: str, sender: str, op: MessageOp, now: float
) -> None:
    """A message that never crossed a relay (a post, or to our own session)."""
    body = messages.body_json({**unstructure(op), "relay_ts": now})
    messages.hold(
        conn, message_id=msg_id, room_id=LOCAL_ROOM, sender=sender, to=op.to,
        intent=op.intent.value, body=body, received_at=now,
    )


def sent_views(
    conn: sqlite3.Connection, limit: int, *, since: float | None = None,
    before: str | None = None,
) -> SentReply:
    """One page of what we sent, newest first, each with its state; ``next`` names where the
    next page starts (``before``), or None when this page reached the end.

    Raises:
        UnknownMessage: ``before`` names no message we sent.
    """
    limit = max(1, min(limit, MAX_SENT_PAGE))
    position = None
    if before is not None:
        position = messages.sent_position(conn, before)
        if position is None:
            raise UnknownMessage(f"You sent no message {before[:SHORT_ID]} to page from.")
    rows = messages.sent_page(conn, limit + 1, since=since, before=position)
    views = []
    for row in rows[:limit]:
        found = messages.delivery(conn, row.msg_id)
        views.append(SentView(
            row.msg_id, row.to_label, row.kind, found.state.value, row.created_at,
            found.reason, found.by, row.text,
        ))
    more = len(rows) > limit
    return SentReply(views, views[-1].id if more else None)


async def arrive_locally(
    daemon: Host, *, msg_id: str, sender: str, op: MessageOp, now: float
) -> None:
    """Hold a message that crossed no relay, then tell the local listeners (gate, watch, inbox)."""
    await daemon.store.write(
        lambda c: hold_local(c, msg_id=msg_id, sender=sender, op=op, now=now)
    )
    await daemon.tell_local([Applied(LOCAL_ROOM, 0, msg_id, sender, now, op)])


def _check_size(op: MessageOp) -> None:
    """``too_large`` before anything is kept: ``op``, as it will be sealed (with its recipient),
    must fit the relay's limit."""
    size = len(encode_op(op)) + SEAL_OVERHEAD
    if size > MAX_OP_BODY:
        raise TooLarge(
            f"The message with its slices is {size // 1024} KiB; a message is at most "
            f"{MAX_OP_BODY // 1024} KiB. Attach fewer or smaller slices."
        )


def _asked_us(conn: sqlite3.Connection, ref: str, asker: str) -> tuple[str, str]:
    """The held ask ``ref`` names (its id, a prefix, or its correlation) if ``asker`` asked it.

    Returns ``(message id, correlation)``; UnknownMessage when it is no ask of theirs to us.
    """
    msg_id = messages.ask_with_correlation(conn, ref) or find_held(conn, ref)
    held_row = messages.held_sender_and_body(conn, msg_id)
    if held_row is None:  # find_held found it in this same transaction
        raise UnknownMessage(f"There is no message {msg_id[:8]} here.")
    sender, body = held_row
    held = json.loads(body)
    if held.get("kind") != "ask" or not held.get("correlation"):
        raise UnknownMessage(f"Message {msg_id[:8]} is not a question; only an ask is answered.")
    contact = contact_named(conn, asker.partition("/")[0])
    if contact.fingerprint != sender:
        raise UnknownMessage(f"{contact.label} did not ask {msg_id[:8]}; someone else did.")
    return msg_id, str(held["correlation"])


async def _build_slices(daemon: Host, params: SendParams) -> tuple[Slice, ...]:
    """The slices ``params`` ask for. Files and diffs come only from a project one of our
    sessions works in (``params.cwd`` is the caller's word, so it only picks among them)."""
    if not params.slices:
        return ()
    transcript = params.transcript
    if transcript is None and needs_transcript(params.slices):  # the session's, as recorded
        transcript = await daemon.store.read(
            lambda c: current_transcript(c, session=params.session, cwd=params.cwd)
        )
    projects = None  # asked for only when a slice reads the project
    if needs_project(params.slices):
        projects = await daemon.store.read(lambda c: slice_projects(c, session=params.session))

    def build() -> tuple[Slice, ...]:
        allowed = projects
        if allowed is not None and params.peer_cwd is not None and (
                params.session is None or not allowed):
            allowed = [*allowed, str(project_root(Path(params.peer_cwd)))]
        root = None if allowed is None else slice_root(params.cwd or params.peer_cwd, allowed)
        return tuple(build_slice(spec, root=root, transcript=transcript) for spec in params.slices)

    # A worker thread, so the event loop goes on serving everyone else while files are read
    # (each slice reads at most its cap, and scans it in pieces: crosstalk.slices.build).
    with trio.move_on_after(SLICE_DEADLINE):
        return await trio.to_thread.run_sync(build, abandon_on_cancel=True)
    raise TooLarge(
        f"The slices took longer than {SLICE_DEADLINE:g} s to gather, so nothing was sent. "
        "Attach a smaller slice or a narrower diff."
    )


def _spend_ration(conn: sqlite3.Connection, recipient: str, reason: str | None, now: float) -> None:
    ration = Ration(sent=load_ration_stamps(conn))
    ration.spend(recipient, reason, now)  # raises needs_reason / ration_spent
    ration.forget_before(now)
    save_ration_stamps(conn, ration.stamps())


async def deliver(
    daemon: Host, params: SendParams, *, kind: Kind, correlation: str | None = None
) -> SendReply:
    """Seal and queue one message (or hold it locally for ``me/SESSION``); wait briefly for sent."""
    op = await _message(daemon, params, kind=kind, correlation=correlation)
    truncated = [i for i, sl in enumerate(op.slices) if sl.truncated]
    if params.to.startswith("me/"):  # our own other session: no relay at all
        where = params.to.removeprefix("me/")
        mine_to = await daemon.store.read(lambda c: resolve_own(c, where, now=time.time()))
        local = attrs.evolve(op, to=mine_to)
        _check_size(local)  # the same limit as a message that crosses the relay
        mine = daemon.keys.fingerprint
        await arrive_locally(daemon, msg_id=op.msg_id, sender=mine, op=local, now=op.sent_at)
        return SendReply(id=op.msg_id, state="delivered", to=[params.to], truncated=truncated)
    address = await daemon.store.read(lambda c: resolve(c, params.to))
    op = attrs.evolve(op, to=address.to)
    _check_size(op)
    if params.unprompted:
        await daemon.store.write(
            lambda c: _spend_ration(c, address.label, params.because, op.sent_at)
        )
    state = await _queue(daemon, op, address, kind=kind)
    return SendReply(id=op.msg_id, state=state, to=[address.label], truncated=truncated)


async def _message(
    daemon: Host, params: SendParams, *, kind: Kind, correlation: str | None
) -> MessageOp:
    """The op ``params`` ask for, checked (empty, too long) before anything is kept; its size
    is checked once its recipient is in it (:func:`_check_size`)."""
    if not params.text.strip():
        raise UsageError("There is nothing to send: the message is empty.")
    if len(params.text) > MAX_TEXT:
        raise TooLarge(f"The message is longer than {MAX_TEXT} characters; attach it as a slice.")
    intent = Intent.parse(params.intent)
    me = daemon.require_identity()
    thread, reply_to = params.thread, params.reply_to
    if reply_to is not None:  # an unknown id is unknown_message; a reply joins its thread
        reply_to, joined = await daemon.store.read(lambda c: reply_target(c, params.reply_to or ""))
        thread = thread or joined
    op = MessageOp(
        msg_id=nacl.utils.random(16).hex(),
        text=params.text,
        intent=intent,
        kind=kind,
        from_label=me.label,
        from_session=params.session,
        thread=thread,
        reply_to=reply_to,
        correlation=correlation,
        sent_at=time.time(),
        slices=await _build_slices(daemon, params),
        unprompted_because=params.because if params.unprompted else None,
    )
    return op


async def _queue(daemon: Host, op: MessageOp, address: Address, *, kind: Kind) -> str:
    """Queue ``op`` for ``address``'s room, recording it as sent by us in the same commit, and
    return its delivery state after waiting briefly for the relay to take it."""
    sent_send, sent_receive = trio.open_memory_channel[int](1)
    await daemon.router.send(WatchSent(op.msg_id, sent_send))

    def record(c: sqlite3.Connection) -> None:
        messages.record_sent(
            c, msg_id=op.msg_id, room_id=address.room_id, to_label=address.label,
            kind=kind.value, chars=len(op.text), created_at=op.sent_at, thread=op.thread,
            reply_to=op.reply_to, text=op.text,
        )

    await daemon.send_op(
        address.room_id, op, op_id=op.msg_id, also=record
    )
    with trio.move_on_after(SENT_WAIT), contextlib.suppress(trio.EndOfChannel):  # refused
        await sent_receive.receive()
    state, _ = await daemon.store.read(lambda c: messages.delivery_state(c, op.msg_id))
    return state


async def send(daemon: Host, params: SendParams) -> SendReply:
    """The ``send`` op: a message or a handoff."""
    kind = Kind.HANDOFF if params.kind == "handoff" else Kind.MESSAGE
    return await deliver(daemon, params, kind=kind)


async def answer(daemon: Host, params: AnswerParams) -> SendReply:
    """The ``answer`` op: answer an ask of theirs, and withdraw its notices."""
    msg_id, correlation = await daemon.store.read(
        lambda c: _asked_us(c, params.correlation, params.to)
    )
    message = SendParams(to=params.to, text=params.text, intent="question", session=params.session)
    reply = await deliver(daemon, message, kind=Kind.ANSWER, correlation=correlation)
    try:
        await daemon.store.write(lambda c: messages.withdraw_notices(c, [msg_id], time.time()))
    except StorageFull:
        # The answer is committed and on its way: an error now would be a lie that invites a
        # second answer (sim seed 40). The ask's notice stays until it is read.
        log.warning("answered %s, but could not withdraw its notice: the disk is full", msg_id)
    return reply


async def post(daemon: Host, params: PostParams) -> PostReply:
    """The ``post`` op: a notice from a local source, held here and crossing no relay."""
    intent = Intent.parse(params.intent)
    source = params.source.strip() or "local"
    if len(source) > MAX_SOURCE:
        raise UsageError(f"A post's --source is a name of at most {MAX_SOURCE} characters.")
    if not params.text.strip():
        raise UsageError("There is nothing to post: the text is empty.")
    if len(params.text) > MAX_TEXT:
        raise TooLarge(f"A post is at most {MAX_TEXT} characters.")
    msg_id = nacl.utils.random(16).hex()
    now = time.time()
    op = MessageOp(
        msg_id=msg_id, text=params.text, intent=intent, kind=Kind.NOTICE, from_label=source,
        sent_at=now,
    )
    posted_as = local_key(source)
    await arrive_locally(daemon, msg_id=msg_id, sender=posted_as, op=op, now=now)
    return PostReply(posted_as=posted_as, id=msg_id)


async def sent(daemon: Host, params: SentParams) -> SentReply:
    """The ``sent`` op: what we sent lately and how far each got."""
    return await daemon.store.read(
        lambda c: sent_views(c, params.limit, since=params.since, before=params.before)
    )


def hold(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: hold a message (ours from another device, too)."""
    hold_message(conn, applied, me=daemon.keys.fingerprint)


def refused(daemon: Identified, conn: sqlite3.Connection, applied: Applied) -> None:
    """Applier: a recipient's gate refused what we sent."""
    apply_refusal(conn, applied, me=daemon.keys.fingerprint)


def plug(daemon: Host) -> Plugs:
    """Hold messages and take receipts as they apply; ``send``, ``answer``, ``post``, ``sent``.

    ``delivered`` receipts are owed in the apply transaction and posted by the receipts actor
    (:mod:`crosstalk.features.read`)."""
    return Plugs(
        ops=(
            op(SEND, functools.partial(send, daemon)),
            op(ANSWER, functools.partial(answer, daemon)),
            op(POST, functools.partial(post, daemon)),
            op(SENT, functools.partial(sent, daemon)),
        ),
        appliers=(
            functools.partial(hold, daemon), apply_receipt, functools.partial(refused, daemon),
        ),
    )
