"""The ops the hooks call about sessions: ``session_register``, ``session_status`` (busy/idle;
the reply lists what surfaced), ``notices`` (what the gate decided, optionally only what is
surfaced and not yet shown) and ``notice_shown`` (a session showed these); and ``hook_event``,
all a hook event needs in one round trip: register, then the status, then (when asked) the
pending notices with their words and the working set, exactly as those ops answer them, and
the files the session edited or is about to edit, handed to the edits feature's ops
(``edits_touched``, ``edits_check``) when this daemon serves them.

Plugged in by :func:`crosstalk.features.attention.ops.plug`, which owns the attention gate actor
and hands over a way to reach its inbox.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Protocol

import trio

from crosstalk.actors.gate import GateInput, SessionTurned
from crosstalk.core.triage import SessionStatus
from crosstalk.errors import CrosstalkError, UsageError
from crosstalk.features.caps import CallsOps, Stored
from crosstalk.features.feature import ControlOp, op
from crosstalk.features.inbox.actor import held_text
from crosstalk.store import attention as db
from crosstalk.store.messages import held_body
from crosstalk.store.sessions import get_session, register_session
from crosstalk.wire.control.params import (
    CheckParams,
    HookEventParams,
    NoticeShownParams,
    NoticesParams,
    SessionRegisterParams,
    SessionStatusParams,
    TouchedParams,
    WorkingSetParams,
)
from crosstalk.wire.control.replies.daemon import (
    EditWarning,
    HookEventReply,
    NoticeShownReply,
    NoticesReply,
    NoticeView,
    SessionStatusReply,
    SessionView,
    Surfaced,
)
from crosstalk.wire.control.replies.memory import CheckReply, TouchedReply, WorkingSetReply
from crosstalk.wire.control.table import (
    EDITS_CHECK,
    EDITS_TOUCHED,
    HOOK_EVENT,
    NOTICE_SHOWN,
    NOTICES,
    SESSION_REGISTER,
    SESSION_STATUS,
)
from crosstalk.wire.control.table_memory import WORKING_SET

GATE_REPLY_TIMEOUT = 10.0


class Host(Stored, CallsOps, Protocol):
    """What the session ops use: the store, and the op table (``hook_event`` runs
    ``working_set`` in-process when the memory feature serves it)."""


def _notices(conn: sqlite3.Connection, params: NoticesParams) -> NoticesReply:
    project = ""
    if params.session is not None:
        found = get_session(conn, params.session)
        project = found.project if found is not None else ""
    rows = db.list_notices(conn, params.session, project, pending=params.pending)
    words = _words(conn, [n.message_id for n in rows if n.decision.words]) if params.words else {}
    return NoticesReply([
        NoticeView(
            id=n.message_id, sender=n.sender, label=n.label, session=n.session, room=n.room_id,
            from_session=n.from_session, intent=n.intent.value, kind=n.kind,
            decision=n.decision.value, due=n.due, created_at=n.created_at,
            surfaced_at=n.surfaced_at, batch=n.batch, words=words.get(n.message_id),
        )
        for n in rows
    ])


def _words(conn: sqlite3.Connection, message_ids: list[str]) -> dict[str, str]:
    """The held words of ``deliver``-level notices, read exactly as the inbox push reads them."""
    found: dict[str, str] = {}
    for message_id in message_ids:
        text = held_text(held_body(conn, message_id))
        if text is not None:
            found[message_id] = text
    return found


def _parse_status(text: str) -> SessionStatus:
    try:
        return SessionStatus(text.strip().lower())
    except ValueError:
        raise UsageError(f"{text!r} is not a session status: use busy, idle or unknown.") from None


GateInbox = trio.MemorySendChannel[GateInput]  # the gate actor's mailbox
"""Returns the running gate's inbox (it changes when the gate restarts)."""


async def notices(daemon: Host, params: NoticesParams) -> NoticesReply:
    """The notices for a session (pending ones, or all), with words when asked."""
    return await daemon.store.read(lambda c: _notices(c, params))


async def notice_shown(daemon: Host, params: NoticeShownParams) -> NoticeShownReply:
    """The session put these notices in front of its agent: they are shown."""
    shown = await daemon.store.write(
        lambda c: db.mark_shown(c, params.ids, params.session, time.time())
    )
    return NoticeShownReply(shown)


def _register(conn: sqlite3.Connection, params: SessionRegisterParams, now: float) -> SessionView:
    s = register_session(
        conn, name=params.name, client=params.client, project=params.project,
        inbox_socket=params.inbox_socket, now=now, transcript_path=params.transcript_path,
    )
    return SessionView(s.name, s.client, s.project, s.status.value, s.transcript_path)


async def session_register(daemon: Host, params: SessionRegisterParams) -> SessionView:
    """Record a session (or refresh its record) and say what we know of it."""
    return await daemon.store.write(lambda conn: _register(conn, params, time.time()))


async def session_status(
    gate: GateInbox,
    params: SessionStatusParams,
    first: Callable[[sqlite3.Connection, float], object] | None = None,
) -> SessionStatusReply:
    """A session turned busy or idle: the gate answers with what that surfaced for it.

    ``first`` runs at the start of the gate's transaction (see :class:`SessionTurned`).
    """
    status = _parse_status(params.status)
    send, receive = trio.open_memory_channel[tuple[Surfaced, ...]](1)
    await gate.send(SessionTurned(params.name, status, send, first))
    surfaced: tuple[Surfaced, ...] | None = None
    with trio.move_on_after(GATE_REPLY_TIMEOUT):
        surfaced = await receive.receive()
    if surfaced is None:
        raise CrosstalkError("The attention gate did not answer in time; try again.")
    return SessionStatusReply(params.name, status.value, list(surfaced))


async def hook_event(daemon: Host, gate: GateInbox, params: HookEventParams) -> HookEventReply:
    """One hook event in one request: register, set the status, the working set, notices.

    At most one commit and one read besides the working set's: a prompt or a stop is the
    gate's transaction, then the read of the notices it may have surfaced; any other event
    registers and reads its pending notices in one write transaction.
    """
    register = SessionRegisterParams(
        params.name, params.client, params.project, params.inbox_socket, params.transcript_path,
    )
    pending = NoticesParams(params.name, pending=True, words=True) if params.notices else None
    rows: list[NoticeView] | None = None
    if params.status is None:

        def register_and_read(conn: sqlite3.Connection) -> tuple[SessionView, list[NoticeView]]:
            view = _register(conn, register, time.time())
            return view, [] if pending is None else _notices(conn, pending).notices

        view, found = await daemon.store.write(register_and_read)
        rows = None if pending is None else found
    else:
        # The gate registers the session in the transaction that turns its status: a prompt
        # or a stop is one commit (one fsync), not two.
        views: list[SessionView] = []
        await session_status(
            gate, SessionStatusParams(params.name, params.status),
            first=lambda conn, now: views.append(_register(conn, register, now)),
        )
        view = views[0]
        if pending is not None:
            rows = (await notices(daemon, pending)).notices
    text: str | None = None
    if params.working_set and daemon.ops.has("working_set"):
        asked = WorkingSetParams(session=params.name, cwd=params.cwd)
        text = (await daemon.ops.run(WORKING_SET, asked, WorkingSetReply)).text
    await _touched(daemon, params)
    return HookEventReply(view, text, rows, await _check(daemon, params))


async def _touched(daemon: Host, params: HookEventParams) -> None:
    """Hand the files the session wrote to ``edits_touched``, when this daemon serves it."""
    if params.edited and daemon.ops.has("edits_touched"):
        asked = TouchedParams(params.name, params.cwd, list(params.edited))
        await daemon.ops.run(EDITS_TOUCHED, asked, TouchedReply)


async def _check(daemon: Host, params: HookEventParams) -> EditWarning | None:
    """``edits_check``'s answer on the files about to be written; None when it has nothing to
    say (no text and allow) or this daemon does not serve it."""
    if not (params.editing and daemon.ops.has("edits_check")):
        return None
    asked = CheckParams(params.name, params.cwd, list(params.editing))
    answer = await daemon.ops.run(EDITS_CHECK, asked, CheckReply)
    warning = EditWarning(answer.text or None, answer.decision or "allow")
    return None if warning.text is None and warning.decision == "allow" else warning


def session_ops(daemon: Host, gate: GateInbox) -> tuple[ControlOp, ...]:
    """The session and notice ops; ``gate`` returns the running gate's inbox."""
    return (
        op(HOOK_EVENT, functools.partial(hook_event, daemon, gate)),
        op(NOTICES, functools.partial(notices, daemon)),
        op(NOTICE_SHOWN, functools.partial(notice_shown, daemon)),
        op(SESSION_REGISTER, functools.partial(session_register, daemon)),
        op(SESSION_STATUS, functools.partial(session_status, gate)),
    )
