"""The gate's routing: which session a message is for, when it is due, and the refusal.

Theory of operation
-------------------
:mod:`crosstalk.core.gate` says *what* happens to one arrival; this module says *for whom* and
*when*. The gate actor reads the sessions table and the held notices inside its transaction and
asks these functions:

* :func:`live_sessions`: the sessions heard from within :data:`SESSION_TTL`, most recently seen
  first. Every other function takes this list, so "live" means one thing everywhere.
* :func:`route`: an arrival's target session and the status it is triaged against. A message
  naming a session or project goes to that live session (a name match beats a project match);
  one for anyone counts as idle when any live session is idle. With no matching live session it
  is parked: status unknown (which triage counts as busy), claimed by the next session that
  matches.
* :func:`claimant`: for a held notice, the status it is released against and the session that
  would take it. A notice routed to a live session waits on that session; a parked one (or one
  whose session is no longer live) goes to the most recently seen idle session that matches its
  target, with a name match beating a project match as in :func:`route`.
* :func:`due`: the ``due`` column of a notice: ``idle`` for what waits for the session to go
  idle (including a quiet hold of an ``fyi``), else ``now``.
* :func:`refusal`: the automatic ``refusal`` (its own kind, intent fyi) with text
  :data:`REFUSED` sent back for an ask (or handoff) below its level; it replies to it and
  carries the ask's correlation, or the ask's id when it had none (an older peer sent an
  ``answer`` marked ``refused`` instead; both are taken).

Invariants: nothing here reads a clock, draws randomness or touches the database; ``now`` and
the refusal's message id are inputs, so the same inputs always give the same answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from crosstalk.core.triage import Decision, Intent, Kind, SessionStatus
from crosstalk.wire.room_ops import MessageOp

SESSION_TTL = 6 * 3600.0
"""A session not heard from for this long no longer counts as live."""
REFUSED = "refused"
"""The text of the automatic answer to an ask (or handoff) below its level."""


class SessionView(Protocol):
    """What routing needs of a session (:class:`crosstalk.store.sessions.Session` has it)."""

    @property
    def name(self) -> str: ...

    @property
    def project(self) -> str: ...

    @property
    def status(self) -> SessionStatus: ...

    @property
    def last_seen(self) -> float: ...


S = TypeVar("S", bound=SessionView)


def live_sessions(sessions: Iterable[S], now: float) -> list[S]:
    """Sessions heard from within :data:`SESSION_TTL`, most recently seen first."""
    live = [s for s in sessions if now - s.last_seen < SESSION_TTL]
    return sorted(live, key=lambda s: s.last_seen, reverse=True)


def route(to: str | None, live: Sequence[SessionView]) -> tuple[str | None, SessionStatus]:
    """The session a message is for (None = any, or parked) and the status to triage against.

    Args:
        to: the session or project the message names; None for anyone.
        live: the live sessions, as :func:`live_sessions` orders them.
    """
    if to is not None:
        named = _candidates(to, live)
        if named:
            return named[0].name, named[0].status
        return None, SessionStatus.UNKNOWN
    if any(s.status is SessionStatus.IDLE for s in live):
        return None, SessionStatus.IDLE
    return None, SessionStatus.BUSY if live else SessionStatus.UNKNOWN


def claimant(
    session: str | None, target: str | None, live: Sequence[SessionView]
) -> tuple[SessionStatus, str | None]:
    """The status a held notice is released against, and the session that would take it.

    Args:
        session: the session the notice was routed to, or None when it was parked.
        target: the session or project the message named (None for anyone).
        live: the live sessions, as :func:`live_sessions` orders them.
    """
    if session is not None:
        routed = next((s for s in live if s.name == session), None)
        if routed is not None:
            return routed.status, session
        # The session it was routed to is gone: held for the next one, as if parked.
    for candidate in _candidates(target, live):
        if candidate.status is SessionStatus.IDLE:
            return SessionStatus.IDLE, candidate.name
    return SessionStatus.BUSY, None


def _candidates(target: str | None, live: Sequence[S]) -> list[S]:
    """The live sessions a parked notice for ``target`` may go to, as :func:`route` ranks them:
    sessions of that name if any is live, else sessions in that project."""
    if target is None:
        return list(live)
    return [s for s in live if s.name == target] or [
        s for s in live if in_project(s.project, target)
    ]


def in_project(project: str, wanted: str) -> bool:
    """Whether a session working in ``project`` (its git root, a path on the far machine) is in
    the project a sender named: the whole path, or just its last part (``ben/api`` for
    ``/home/ben/src/api``), since a sender does not know where the other machine keeps it."""
    if project == wanted:
        return True
    tail = project.rstrip("/").rsplit("/", 1)[-1]
    return "/" not in wanted and bool(tail) and tail == wanted


def due(decision: Decision, intent: Intent) -> str:
    """``idle`` when a notice waits for its session to go idle, else ``now``."""
    idle = decision in (Decision.NOTICE_WHEN_IDLE, Decision.DELIVER_WHEN_IDLE) or (
        decision is Decision.HOLD_QUIET and intent is Intent.FYI
    )
    return "idle" if idle else "now"


def refusal(ask: MessageOp, ask_id: str, *, msg_id: str, my_label: str, now: float) -> MessageOp:
    """The automatic refusal of ``ask`` (op id ``ask_id``) by our attention settings.

    Args:
        ask: the message that was refused.
        ask_id: its op id, which the answer replies to.
        msg_id: a fresh message id for the answer (the shell draws it).
        my_label: our own label, or "" when the identity is not known yet.
        now: the answer's send time.
    """
    return MessageOp(
        msg_id=msg_id,
        text=REFUSED,
        intent=Intent.FYI,  # news, not a question: nothing is asked of the sender
        kind=Kind.REFUSAL,
        from_label=my_label,
        to=ask.from_session,
        reply_to=ask_id,
        correlation=ask.correlation if ask.correlation is not None else ask_id,
        sent_at=now,
        refused=True,
    )
