"""The attention-gate actor: decides, for every message that arrives, what reaches which session
and when, and releases what it held once the session is idle or a mute ends.

Inputs (its inbox):

* :class:`Arrived` - room messages just applied (a ``daemon.applied_listeners`` entry sends
  them after the room's transaction committed).
* :class:`SessionTurned` - a session reported busy or idle (the ``session_status`` control op;
  the hooks will call it). The gate stores the status and, in the same transaction, surfaces
  what that status releases; the reply lists the batches that surfaced for that session.
* :class:`Recheck` - trust or mutes changed; look again at what is held.

For each arrival the gate builds the facts the pure core needs from what the *daemon* knows,
never from fields the sender wrote: the sender is the fingerprint whose roster key verified the
signature; the room is the relay room the op arrived in (``Applied.room_id``); ``direct`` is
whether we share a joined room of two with them; ``bot`` is the flag pairing stored
(``contacts.is_agent``). It triages against the target session's status (the session or
project the op names, else any live session; none = parked with status unknown), then, in one
transaction, records a ``notices`` row and an attention entry. A ``drop`` (the ``mute`` level)
also marks the held message read, so plain ``read`` no longer shows it while ``read --all``
still does: nothing reaches you, and nothing is destroyed. A ``refuse`` sends an automatic
``answer`` with text ``refused`` and the ask's correlation back into the same room, after the
commit.

Held notices surface once, grouped one batch per sender (``crosstalk.core.held``); a timer
wakes the actor when the earliest mute holding something ends. Ops signed by our own key (our
sends, and our other machines) are not for the gate. Deciding is idempotent by message id, and
at start the gate decides any held message it never saw (a crash between the room's commit and
the listener), so nothing committed goes undecided.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

import attrs
import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.room import Applied
from crosstalk.core.attention import AttentionEntry
from crosstalk.core.gate import Arrival, Verdict, decide
from crosstalk.core.held import HeldBatch, HeldItem, next_release, surface_held
from crosstalk.core.levels import Source
from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus
from crosstalk.errors import CrosstalkError, RemoteProtocolError
from crosstalk.store import attention as db
from crosstalk.store.rooms import direct_room_with, find_contact
from crosstalk.store.sessions import Session, list_sessions, register_session, set_status
from crosstalk.wire.converter import structure_remote
from crosstalk.wire.room_ops import MessageOp, RoomOp

log = logging.getLogger(__name__)

R = TypeVar("R")

SESSION_TTL = 6 * 3600.0
"""A session not heard from for this long no longer counts as live."""
CATCH_UP_WINDOW = 24 * 3600.0
"""At start, held messages younger than this that were never decided are decided."""
REFUSED = "refused"
"""The text of the automatic answer to an ask (or handoff) below its level."""


class StoreLike(Protocol):
    """What the gate needs of :class:`crosstalk.store.db.Store`."""

    async def write(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...

    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...


class SendOpFn(Protocol):
    """:meth:`crosstalk.daemon.Daemon.send_op`: seal an op for a room and commit it."""

    async def __call__(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str: ...


@attrs.frozen
class Me:
    """Our own identity: ops it signed are not for the gate; refusals carry its label."""

    fingerprint: str
    label: str


@attrs.frozen
class Arrived:
    """Room messages just applied and committed."""

    items: tuple[Applied, ...]


@attrs.frozen
class Surfaced:
    """One batch released to a session: one notice's worth from one sender (no peer words)."""

    batch: str
    sender: str
    label: str
    sessions: tuple[str, ...]  # the sender's sessions, as they named them
    items: tuple[str, ...]  # message ids, oldest first
    words: bool  # some item's words may be quoted into the turn (the level was deliver)


@attrs.frozen(eq=False)
class SessionTurned:
    """Session ``session`` is now ``status``; ``reply`` (buffer >= 1) hears what surfaced."""

    session: str
    status: SessionStatus
    reply: trio.MemorySendChannel[tuple[Surfaced, ...]]


@attrs.frozen
class Recheck:
    """Trust or mutes changed: look again at what is held."""


GateInput = Arrived | SessionTurned | Recheck


@attrs.frozen
class _Refusal:
    room_id: str
    op: MessageOp


class GateActor:
    """The attention gate. ``clock`` gives wall-clock seconds (persisted mutes use them)."""

    def __init__(
        self,
        *,
        store: StoreLike,
        me: Callable[[], Me | None],
        send_op: SendOpFn,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._me = me
        self._send_op = send_op
        self._clock = clock

    async def run(
        self,
        ctx: ActorContext[GateInput],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        await self._decide_all(await self._store.read(self._undecided))
        while True:
            release = await self._store.read(self._next_release)
            wait = math.inf if release is None else max(0.0, release - self._clock())
            item: GateInput = Recheck()
            with trio.move_on_after(wait):
                item = await ctx.receive()
            if isinstance(item, Arrived):
                await self._decide_all(item.items)
            elif isinstance(item, SessionTurned):
                surfaced = await self._store.write(functools.partial(self._turn, turned=item))
                item.reply.send_nowait(surfaced)
            else:
                await self._store.write(lambda conn: self._release(conn, None))
            ctx.beat()

    # --- arrivals --------------------------------------------------------------------------------

    async def _decide_all(self, items: Iterable[Applied]) -> None:
        me = self._me()
        mine = [
            a
            for a in items
            if isinstance(a.op, MessageOp) and (me is None or a.sender != me.fingerprint)
        ]
        if not mine:
            return
        refusals = await self._store.write(lambda conn: self._decide(conn, mine, me))
        for refusal in refusals:
            try:
                await self._send_op(refusal.room_id, refusal.op, op_id=refusal.op.msg_id)
            except CrosstalkError as exc:
                log.warning("gate: refusal to %s not sent: %s", refusal.room_id, exc.message)

    def _decide(
        self, conn: sqlite3.Connection, items: list[Applied], me: Me | None
    ) -> list[_Refusal]:
        settings, mutes = db.load_trust(conn), db.load_mutes(conn)
        refusals: list[_Refusal] = []
        for applied in items:
            op = applied.op
            assert isinstance(op, MessageOp)
            if db.has_notice(conn, applied.op_id):
                continue  # re-delivery, or the catch-up already decided it
            now = self._clock()
            source = source_of(conn, applied.sender)
            session, status = _target(conn, op.to, now)
            arrival = Arrival(source, applied.room_id, op.intent, op.kind)
            verdict = decide(settings, mutes, arrival, status, now)
            _record(conn, applied, op, source, session, verdict, now)
            log.debug(
                "gate: %s from %s in %s -> %s (%s)", applied.op_id, source.label,
                applied.room_id, verdict.decision.value, verdict.resolution.explain(source.label),
            )
            if verdict.decision is Decision.REFUSE:
                refusals.append(_refusal(applied, op, me, now))
        return refusals

    def _undecided(self, conn: sqlite3.Connection) -> list[Applied]:
        """Held room messages the gate never decided (committed, then the daemon stopped)."""
        rows = conn.execute(
            "SELECT h.message_id, h.room_id, h.sender, h.body FROM held_messages h "
            "WHERE h.read_at IS NULL AND h.received_at > ? AND NOT EXISTS "
            "(SELECT 1 FROM notices n WHERE n.message_id = h.message_id) "
            "ORDER BY h.received_at, h.rowid",
            (self._clock() - CATCH_UP_WINDOW,),
        ).fetchall()
        found = []
        for message_id, room_id, sender, body in rows:
            try:
                data = json.loads(body)
                relay_ts = float(data.pop("relay_ts", 0.0))
                op = structure_remote(data, MessageOp)
            except (ValueError, TypeError, RemoteProtocolError):
                log.warning("gate: held message %s does not parse; not decided", message_id)
                continue
            found.append(Applied(room_id, 0, message_id, sender, relay_ts, op))
        return found

    # --- held notices ----------------------------------------------------------------------------

    def _turn(self, conn: sqlite3.Connection, turned: SessionTurned) -> tuple[Surfaced, ...]:
        now = self._clock()
        if not any(s.name == turned.session for s in list_sessions(conn)):
            register_session(
                conn, name=turned.session, client="unknown", project="", inbox_socket=None,
                now=now,
            )
        set_status(conn, turned.session, turned.status, now)
        return self._release(conn, turned.session)

    def _release(self, conn: sqlite3.Connection, session: str | None) -> tuple[Surfaced, ...]:
        """Surface everything the current statuses and mutes release; return ``session``'s."""
        now, mutes = self._clock(), db.load_mutes(conn)
        live = _live(conn, now)
        groups: dict[tuple[SessionStatus, str | None], list[HeldItem]] = {}
        for notice in db.held_notices(conn):
            status, claim = _claimant(notice, live)
            groups.setdefault((status, claim), []).append(_held_item(notice))
        mine: list[Surfaced] = []
        for (status, claim), items in groups.items():
            for batch in surface_held(items, status, mutes, now).batches:
                surfaced = _mark_batch(conn, batch, claim, now)
                log.debug("gate: batch %s from %s to %s", surfaced.batch, batch.label, claim)
                if claim == session:
                    mine.append(surfaced)
        return tuple(mine)

    def _next_release(self, conn: sqlite3.Connection) -> float | None:
        held = [_held_item(n) for n in db.held_notices(conn)]
        return next_release(held, db.load_mutes(conn), self._clock())


# --- the facts the gate decides from ------------------------------------------------------------


def source_of(conn: sqlite3.Connection, fingerprint: str) -> Source:
    """The sender as we know them: our name for their key, a room of two, the bot flag."""
    contact = find_contact(conn, fingerprint)
    if contact is not None:
        label = contact.label
    else:
        row = conn.execute(
            "SELECT label FROM room_members WHERE fingerprint = ? LIMIT 1", (fingerprint,)
        ).fetchone()
        label = str(row[0]) if row else fingerprint
    return Source(
        person=fingerprint,
        label=label,
        direct=direct_room_with(conn, fingerprint) is not None,
        bot=contact is not None and contact.is_agent,
    )


def _live(conn: sqlite3.Connection, now: float) -> list[Session]:
    """Sessions heard from within :data:`SESSION_TTL`, most recently seen first."""
    live = [s for s in list_sessions(conn) if now - s.last_seen < SESSION_TTL]
    return sorted(live, key=lambda s: s.last_seen, reverse=True)


def _matches(target: str | None, session: Session) -> bool:
    return target is None or target in (session.name, session.project)


def _target(
    conn: sqlite3.Connection, to: str | None, now: float
) -> tuple[str | None, SessionStatus]:
    """The session a message is for (None = any, or parked) and the status to triage against.

    A message naming a session or project goes to that live session (by name first); one for
    anyone counts as idle when any live session is idle. With no matching live session it is
    parked: status unknown (counted as busy), claimed by the next session that matches.
    """
    live = _live(conn, now)
    if to is not None:
        named = [s for s in live if s.name == to] or [s for s in live if s.project == to]
        if named:
            return named[0].name, named[0].status
        return None, SessionStatus.UNKNOWN
    if any(s.status is SessionStatus.IDLE for s in live):
        return None, SessionStatus.IDLE
    return None, SessionStatus.BUSY if live else SessionStatus.UNKNOWN


def _claimant(notice: db.Notice, live: list[Session]) -> tuple[SessionStatus, str | None]:
    """The status a held notice is released against, and the session that would take it."""
    if notice.session is not None:
        status = next((s.status for s in live if s.name == notice.session), SessionStatus.UNKNOWN)
        return status, notice.session
    for session in live:
        if session.status is SessionStatus.IDLE and _matches(notice.target, session):
            return SessionStatus.IDLE, session.name
    return SessionStatus.BUSY, None


def _due(decision: Decision, intent: Intent) -> str:
    idle = decision in (Decision.NOTICE_WHEN_IDLE, Decision.DELIVER_WHEN_IDLE) or (
        decision is Decision.HOLD_QUIET and intent is Intent.FYI
    )
    return "idle" if idle else "now"


def _record(
    conn: sqlite3.Connection,
    applied: Applied,
    op: MessageOp,
    source: Source,
    session: str | None,
    verdict: Verdict,
    now: float,
) -> None:
    decision = verdict.decision
    db.add_notice(
        conn,
        db.Notice(
            message_id=applied.op_id, session=session, target=op.to, sender=applied.sender,
            label=source.label, from_session=op.from_session, room_id=applied.room_id,
            intent=op.intent, kind=op.kind.value, decision=decision,
            due=_due(decision, op.intent), created_at=now,
            surfaced_at=now if decision.interrupts else None,
        ),
    )
    db.append_attention(conn, [AttentionEntry(applied.op_id, source.label, now, decision)])
    if decision is Decision.DROP:
        # The `mute` level: nothing reaches you. Kept for `read --all`, hidden from `read`.
        conn.execute(
            "UPDATE held_messages SET read_at = ? WHERE message_id = ? AND read_at IS NULL",
            (now, applied.op_id),
        )


def _refusal(applied: Applied, op: MessageOp, me: Me | None, now: float) -> _Refusal:
    answer = MessageOp(
        msg_id=secrets.token_hex(16),
        text=REFUSED,
        intent=Intent.QUESTION,
        kind=Kind.ANSWER,
        from_label=me.label if me is not None else "",
        to=op.from_session,
        reply_to=applied.op_id,
        correlation=op.correlation if op.correlation is not None else applied.op_id,
        sent_at=now,
        refused=True,
    )
    return _Refusal(applied.room_id, answer)


def _held_item(notice: db.Notice) -> HeldItem:
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


def _mark_batch(
    conn: sqlite3.Connection, batch: HeldBatch, claim: str | None, now: float
) -> Surfaced:
    batch_id = secrets.token_hex(8)
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
    return Surfaced(
        batch=batch_id,
        sender=batch.sender,
        label=batch.label,
        sessions=batch.sessions,
        items=tuple(it.item for it in batch.items),
        words=any(it.words for it in batch.items),
    )
