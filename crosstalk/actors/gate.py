"""The attention-gate actor: decides, for every message that arrives, what reaches which session
and when, and releases what it held once the session is idle or a mute ends.

Inputs (its inbox):

* :class:`Arrived` - messages that crossed no relay (posts and ``me/SESSION``, room ``local``,
  and decisions announced, via the attention feature's local listener): their source is the
  local post source or ourselves, they arrive in no room, and a refusal has nobody to answer.
  A room's messages are not sent here: the gate decides them inside the room transaction that
  holds them (:meth:`Triage.applier`, an applier of the attention feature), so a message is
  held and decided with one commit, and the inbox push nudged after that commit finds its
  notice. Only what that decided to refuse comes here, after the commit, as :class:`Refuse`.
* :class:`Refuse` - the automatic answers owed for asks and handoffs a room's transaction
  refused; the actor sends them (sending waits on the room's actor, which an applier cannot).
* :class:`SessionTurned` - a session reported busy or idle (the ``session_status`` control op,
  and ``hook_event``, which registers the session in the same transaction). The gate stores the
  status and, in the same transaction, surfaces what that status releases; the reply lists the
  batches that surfaced for that session.
* :class:`Recheck` - trust or mutes changed; look again at what is held.

For each arrival the gate builds the facts the pure core needs from what the *daemon* knows,
never from fields the sender wrote: the sender is the fingerprint whose roster key verified the
signature; the room is the relay room the op arrived in (``Applied.room_id``); ``direct`` is
whether we share a joined room of two with them; ``bot`` is the flag pairing stored
(``contacts.is_agent``). It triages against the target session's status (the session or
project the op names, else any live session; none = parked with status unknown), then, in the
transaction it decides in, records a ``notices`` row and an attention entry. A ``drop`` (the
``mute`` level) also marks the held message read, so plain ``read`` no longer shows it while
``read --all`` still does: nothing reaches you, and nothing is destroyed. A ``refuse`` sends
an automatic ``answer`` with text ``refused`` and the ask's correlation back into the same
room, after the commit (a crash between that commit and the send loses the refusal, never the
decision).

Held notices surface once, grouped one batch per sender (``crosstalk.core.held``); a timer
wakes the actor when the earliest mute holding something ends. Ops signed by our own key (our
sends, and our other machines) are not for the gate. Deciding is idempotent by message id, and
at start the gate decides any held message it never saw (a local arrival whose listener a crash
cut short, or a message held before rooms decided in their own transaction), so nothing
committed goes undecided.

Where the rest lives: which session a message is for and the refusal's shape are pure
(:mod:`crosstalk.core.gate_routing`); the reads and writes inside each transaction are in
:mod:`crosstalk.store.gate`. This module is the loop and the transactions.
"""

from __future__ import annotations

import functools
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
from crosstalk.core.gate import Arrival, decide
from crosstalk.core.gate_routing import claimant, refusal, route
from crosstalk.core.held import HeldBatch, HeldItem, next_release_of, surface_held
from crosstalk.core.levels import TrustSettings
from crosstalk.core.mute import MuteState
from crosstalk.core.room import Applied
from crosstalk.core.triage import Decision, SessionStatus
from crosstalk.errors import CrosstalkError
from crosstalk.store import attention as db
from crosstalk.store.gate import (
    LOCAL_ROOM,
    held_item,
    live,
    local_source,
    mark_batch,
    record,
    source_of,
    undecided,
)
from crosstalk.store.sessions import get_session, register_session, set_status
from crosstalk.wire.control.replies.daemon import Surfaced
from crosstalk.wire.room_ops import MessageOp, RoomOp

log = logging.getLogger(__name__)

R = TypeVar("R")

CATCH_UP_WINDOW = 24 * 3600.0
"""At start, held messages younger than this that were never decided are decided."""


class StoreLike(Protocol):
    """What the gate needs of :class:`crosstalk.store.db.Store`."""

    async def write(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...

    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...


class SendOpFn(Protocol):
    """:meth:`crosstalk.daemon.tree.Daemon.send_op`: seal an op for a room and commit it."""

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


@attrs.frozen(eq=False)
class SessionTurned:
    """Session ``session`` is now ``status``; ``reply`` (buffer >= 1) hears what surfaced.

    ``first``, if given, runs first in the same transaction, with the gate's ``now``: a hook
    event registers its session there, so the event is one commit, not two.
    """

    session: str
    status: SessionStatus
    reply: trio.MemorySendChannel[tuple[Surfaced, ...]]
    first: Callable[[sqlite3.Connection, float], object] | None = None


@attrs.frozen
class Recheck:
    """Trust or mutes changed: look again at what is held."""


@attrs.frozen
class Refusal:
    """The automatic answer ``op`` owed into ``room_id`` for an ask or handoff we refused."""

    room_id: str
    op: MessageOp


@attrs.frozen
class Refuse:
    """Send these refusals: their decisions are committed (:meth:`Triage.take_refusals`)."""

    refusals: tuple[Refusal, ...]


GateInput = Arrived | SessionTurned | Recheck | Refuse


class Triage:
    """The gate's decisions, made inside a transaction someone else holds: the actor's own
    (local arrivals, the catch-up at start) or a room's, as an applier.

    ``me`` is our identity (ops it signed are not for the gate), ``clock`` wall-clock seconds.
    """

    def __init__(self, *, me: Callable[[], Me | None], clock: Callable[[], float]) -> None:
        self._me = me
        self._clock = clock
        # Refusals decided by :meth:`applier`, by op id, until their transaction has committed
        # and :meth:`take_refusals` hands them on. An op decided again after a rollback
        # replaces (or clears) its entry, so only a committed decision's refusal is sent.
        self._owed: dict[str, Refusal] = {}

    def applier(self, conn: sqlite3.Connection, applied: Applied) -> None:
        """Applier: decide a room's message in the transaction that holds it."""
        if not isinstance(applied.op, MessageOp):
            return
        decided = self.decide(conn, [applied])
        if decided is None:
            return  # not for the gate, or decided before (a re-delivery): nothing changes
        if decided:
            self._owed[applied.op_id] = decided[0]
        else:
            self._owed.pop(applied.op_id, None)

    def take_refusals(self, applied: Iterable[Applied]) -> tuple[Refusal, ...]:
        """The refusals :meth:`applier` decided for ``applied``, whose commit is done."""
        owed = self._owed
        if not owed:
            return ()
        return tuple(r for a in applied if (r := owed.pop(a.op_id, None)) is not None)

    def decide(self, conn: sqlite3.Connection, items: Iterable[Applied]) -> list[Refusal] | None:
        """Decide the messages among ``items`` not decided yet; the refusals they owe, or None
        when none of them was for the gate and undecided."""
        me = self._me()
        mine = [
            a
            for a in items
            if isinstance(a.op, MessageOp)
            and (a.room_id == LOCAL_ROOM or me is None or a.sender != me.fingerprint)
            and not db.has_notice(conn, a.op_id)  # re-delivery, or the catch-up decided it
        ]
        if not mine:
            return None
        settings, mutes = db.load_trust(conn), db.load_mutes(conn)
        refusals = [self._decide_one(conn, applied, settings, mutes, me) for applied in mine]
        return [refused for refused in refusals if refused is not None]

    def _decide_one(
        self,
        conn: sqlite3.Connection,
        applied: Applied,
        settings: TrustSettings,
        mutes: MuteState,
        me: Me | None,
    ) -> Refusal | None:
        op = applied.op
        assert isinstance(op, MessageOp)
        now = self._clock()
        local = applied.room_id == LOCAL_ROOM
        source = local_source(applied.sender) if local else source_of(conn, applied.sender)
        session, status = route(op.to, live(conn, now))
        arrival = Arrival(source, None if local else applied.room_id, op.intent, op.kind)
        verdict = decide(settings, mutes, arrival, status, now)
        record(conn, applied, op, source, session, verdict, now)
        log.debug(
            "gate: %s from %s in %s -> %s (%s)", applied.op_id, source.label,
            applied.room_id, verdict.decision.value, verdict.resolution.explain(source.label),
        )
        if verdict.decision is not Decision.REFUSE or local:  # a post has nobody to answer
            return None
        answer = refusal(
            op, applied.op_id, msg_id=secrets.token_hex(16),
            my_label=me.label if me is not None else "", now=now,
        )
        return Refusal(applied.room_id, answer)


class GateActor:
    """The attention gate. ``clock`` gives wall-clock seconds (persisted mutes use them)."""

    def __init__(
        self,
        *,
        store: StoreLike,
        me: Callable[[], Me | None],
        send_op: SendOpFn,
        clock: Callable[[], float] = time.time,
        triage: Triage | None = None,
    ) -> None:
        self._store = store
        self._send_op = send_op
        self._clock = clock
        # Shared with the rooms' applier when the attention feature plugs one in.
        self._triage = triage if triage is not None else Triage(me=me, clock=clock)

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
            elif isinstance(item, Refuse):
                await self._send_refusals(item.refusals)
            elif isinstance(item, SessionTurned):
                surfaced = await self._store.write(functools.partial(self._turn, turned=item))
                item.reply.send_nowait(surfaced)
            else:
                await self._store.write(lambda conn: self._release(conn, None))
            ctx.beat()

    # --- arrivals --------------------------------------------------------------------------------

    async def _decide_all(self, items: Iterable[Applied]) -> None:
        items = tuple(items)
        if not any(isinstance(a.op, MessageOp) for a in items):
            return
        refusals = await self._store.write(lambda conn: self._triage.decide(conn, items))
        await self._send_refusals(refusals or ())

    async def _send_refusals(self, refusals: Iterable[Refusal]) -> None:
        for refused in refusals:
            try:
                await self._send_op(refused.room_id, refused.op, op_id=refused.op.msg_id)
            except CrosstalkError as exc:
                log.warning("gate: refusal to %s not sent: %s", refused.room_id, exc.message)

    def _undecided(self, conn: sqlite3.Connection) -> list[Applied]:
        """Held room messages the gate never decided (committed, then the daemon stopped)."""
        return undecided(conn, self._clock() - CATCH_UP_WINDOW)

    # --- held notices ----------------------------------------------------------------------------

    def _turn(self, conn: sqlite3.Connection, turned: SessionTurned) -> tuple[Surfaced, ...]:
        now = self._clock()
        if turned.first is not None:
            turned.first(conn, now)
        if get_session(conn, turned.session) is None:
            register_session(
                conn, name=turned.session, client="unknown", project="", inbox_socket=None,
                now=now,
            )
        set_status(conn, turned.session, turned.status, now)
        return self._release(conn, turned.session)

    def _release(self, conn: sqlite3.Connection, session: str | None) -> tuple[Surfaced, ...]:
        """Surface what the current statuses and mutes release; return ``session``'s.

        With ``session`` (its status just turned) only the notices it could take are looked at,
        plus quiet holds of questions; without (a mute ended, trust or mutes changed) every held
        notice some live session could take. Either way the store reads held notices only
        (:func:`crosstalk.store.attention.releasable_notices`), never the history.
        """
        now, mutes = self._clock(), db.load_mutes(conn)
        sessions = live(conn, now)
        pairs = [(s.name, s.project) for s in sessions]
        turned = next((pair for pair in pairs if pair[0] == session), None)
        groups: dict[tuple[SessionStatus, str | None], list[HeldItem]] = {}
        for notice in db.releasable_notices(conn, pairs, turned):
            status, claim = claimant(notice.session, notice.target, sessions)
            groups.setdefault((status, claim), []).append(held_item(notice))
        mine: list[Surfaced] = []
        for (status, claim), items in groups.items():
            for batch in surface_held(items, status, mutes, now).batches:
                surfaced = _surfaced(batch, secrets.token_hex(8))
                mark_batch(conn, batch, claim, surfaced.batch, now)
                log.debug("gate: batch %s from %s to %s", surfaced.batch, batch.label, claim)
                if claim == session:
                    mine.append(surfaced)
        return tuple(mine)

    def _next_release(self, conn: sqlite3.Connection) -> float | None:
        """When the earliest mute holding something ends; after every input, so it reads the
        mutes alone unless one is in force, then what they hold by sender and room."""
        now, mutes = self._clock(), db.load_mutes(conn)
        if not mutes.active(now):
            return None
        return next_release_of(db.quiet_held_sources(conn), mutes, now)


def _surfaced(batch: HeldBatch, batch_id: str) -> Surfaced:
    return Surfaced(
        batch=batch_id,
        sender=batch.sender,
        label=batch.label,
        sessions=batch.sessions,
        items=tuple(it.item for it in batch.items),
        words=any(it.words for it in batch.items),
    )
