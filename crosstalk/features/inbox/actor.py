"""Claude Code inbox delivery: push surfaced notices into a session's inbox socket, mid-turn.

How it fits: the attention gate decides what reaches which session and marks it *surfaced* in
the ``notices`` table (at once for ``question``/``blocking``, when the session goes idle for
``fyi``). Each session that registered a Claude Code inbox socket has its own actor,
``session-<name>`` (:class:`SessionActor`), which delivers what is surfaced for it and not yet
shown, then marks it *shown*; :class:`SessionKeeper` (the ``inbox`` actor) starts and stops them
as sessions come and go. A socket that freezes costs its own session's actor one restart (the
heartbeat watchdog) and delays no other session's push. Everything else, and anything whose
push failed, stays waiting for the session's hook to pull (``crosstalk.hook.flow``, which leaves
a push session's notices to its actor for a short grace period). So the two paths meet only through
the table, and a missing, stale or refusing socket costs nothing but a log line.

The wire format (crosstalk-behaviour.md §6.4, captured from Claude Code): one JSON line
``{msgV: 1, msg_id, type: "user", message: {role: "user", content}, priority: "next",
from: "uds:<the target's own socket>"}``, where ``content`` is a
``<cross-session-message from=… from-name="crosstalk ◢ peer/session" from-mode="prompting">``
block whose first inner line is a plain sentence (Claude Code collapses a message to its first
line). **No auth line is ever sent**: presenting the session's token would mark the message as
the user's own and skip the approval hold meant for other people's messages.

Content: :func:`crosstalk.core.notice.render_arrivals`, which the pull hook uses too: a notice
(no peer words) per batch and sender; only when the gate's decision carries words (the receiver
raised the sender to ``deliver``) one delivery per message, quoted between fresh random markers.
Every sender-controlled string is escaped. The push quotes the words whole; the hook, whose
clients cut long output, cuts long quotes inside the markers.

When: after every room commit (a nudge from the fan-out of applied ops, passed on by the
keeper to every session's actor) and every :data:`SWEEP` seconds, which also catches what the
gate surfaces when a session goes idle. The keeper looks for new and gone sessions at the same
moments, so a new session's actor is there before the first nudge it is due.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.gate import StoreLike
from crosstalk.core.notice import Arrival, escape_text, render_arrivals
from crosstalk.core.triage import Decision, SessionStatus
from crosstalk.store import attention as db
from crosstalk.store.gate import SurfacedNotice, surfaced_unshown
from crosstalk.store.sessions import Session, seen_since

log = logging.getLogger(__name__)

SWEEP = 1.0
"""Seconds between looks at the notices table when nothing nudges the actor."""
BACKOFF = 30.0
"""Seconds a socket that failed is left alone (its notices go to the hook meanwhile)."""
HORIZON = 24 * 3600.0
"""Surfaced notices older than this are left to the hook."""
SESSION_TTL = 6 * 3600.0
FROM_NAME_MAX = 120


@dataclass(frozen=True)
class Pending:
    """One surfaced, unshown notice and (for ``deliver``) the words it may quote."""

    message_id: str
    session: str | None
    target: str | None
    label: str
    from_session: str | None
    kind: str
    words: str | None
    batch: str | None

    @property
    def arrival(self) -> Arrival:
        return Arrival(
            self.message_id, self.label, self.from_session, self.kind, self.words, self.batch
        )


@dataclass(frozen=True)
class Push:
    """One inbox message: where it goes, its content, and the notices it shows."""

    session: str
    socket: str
    content: str
    from_name: str
    ids: tuple[str, ...]


# --- pure: what to send --------------------------------------------------------------------------


def from_name(label: str, session: str | None) -> str:
    """The name Claude Code shows for the sender: ``crosstalk ◢ peer/session``, escaped."""
    who = label if not session else f"{label}/{session}"
    return escape_text(f"crosstalk \u25e2 {who}"[:FROM_NAME_MAX])


def wrap(content: str, *, socket: str, name: str) -> str:
    """The ``<cross-session-message>`` block Claude Code expects around a message."""
    source = escape_text(f"uds:{socket}")
    return (
        f'<cross-session-message from="{source}" from-name="{name}" from-mode="prompting">\n'
        f"{content.rstrip(chr(10))}\n</cross-session-message>"
    )


def inbox_line(push: Push, *, msg_id: str) -> bytes:
    """The one JSON line written to the socket (and nothing else: no auth line)."""
    body = {
        "msgV": 1,
        "msg_id": msg_id,
        "type": "user",
        "message": {
            "role": "user",
            "content": wrap(push.content, socket=push.socket, name=push.from_name),
        },
        "priority": "next",
        "from": f"uds:{push.socket}",
    }
    return (json.dumps(body, ensure_ascii=False) + "\n").encode()


def plan(
    pending: list[Pending], sessions: list[Session], *, marker: Callable[[], str]
) -> list[Push]:
    """Group pending notices into inbox messages for the sessions that have a socket."""
    by_session: dict[tuple[str, str], list[Arrival]] = {}
    for item in pending:
        chosen = _session_for(item, sessions)
        if chosen is None or chosen.inbox_socket is None:
            continue
        by_session.setdefault((chosen.name, chosen.inbox_socket), []).append(item.arrival)
    return [
        Push(name, socket, shown.text, from_name(shown.label, shown.session), shown.ids)
        for (name, socket), arrivals in by_session.items()
        for shown in render_arrivals(arrivals, marker=marker)
    ]


def _session_for(item: Pending, sessions: list[Session]) -> Session | None:
    """The session a notice goes to: the one it names, else an idle, then any, matching one."""
    if item.session is not None:
        return next((s for s in sessions if s.name == item.session), None)
    matching = [s for s in sessions if item.target is None or item.target in (s.name, s.project)]
    idle = [s for s in matching if s.status is SessionStatus.IDLE]
    chosen = idle or matching
    return chosen[0] if chosen else None


# --- store ---------------------------------------------------------------------------------------


def pushable_sessions(conn: sqlite3.Connection, now: float) -> list[Session]:
    """The live sessions that have an inbox socket, most recently seen first.

    Read through ``sessions_by_last_seen`` (:func:`seen_since`): the keeper and every session's
    actor ask after each committed batch, and retention keeps a month of sessions."""
    return [
        s
        for s in sorted(seen_since(conn, now - SESSION_TTL), key=lambda s: s.last_seen,
                        reverse=True)
        if s.inbox_socket and now - s.last_seen < SESSION_TTL
    ]


def load_pending(conn: sqlite3.Connection, now: float) -> tuple[list[Pending], list[Session]]:
    """Surfaced, unshown notices, and the live sessions that have an inbox socket."""
    sessions = pushable_sessions(conn, now)
    if not sessions:
        return [], []
    notices = surfaced_unshown(conn, now - HORIZON)
    return [_pending(n) for n in notices], sessions


def _pending(n: SurfacedNotice) -> Pending:
    words = quoted_words(n.decision, n.body)
    return Pending(n.message_id, n.session, n.target, n.label, n.from_session, n.kind, words,
                   n.batch)


def quoted_words(decision: str, body: str | None) -> str | None:
    """The words a notice may quote: the held message's text when the gate decided ``deliver``,
    else None (also for an unknown decision: a plain notice is always safe)."""
    try:
        words = Decision(decision).words
    except ValueError:
        return None
    return held_text(body) if words else None


def held_text(body: str | None) -> str | None:
    """The text of a held message's stored body; None for no body or one that is not ours."""
    if body is None:
        return None
    try:
        return str(json.loads(body).get("text", ""))
    except (ValueError, AttributeError):
        return None


# --- the actors ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Nudge:
    """Something was committed: look at the notices table now."""


def nudge(inbox: trio.MemorySendChannel[Nudge]) -> None:
    """Wake an actor whose inbox carries only nudges; a full inbox already holds one, so
    dropping this one loses nothing (the inbox is level-triggered by construction)."""
    try:
        inbox.send_nowait(Nudge())
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        pass


Connect = Callable[[str], Awaitable[trio.abc.SendStream]]


async def _open_unix(path: str) -> trio.abc.SendStream:
    return await trio.open_unix_socket(path)


class SessionActor:
    """One attached session's push (``session-<name>``): delivers what is surfaced for it.

    Each instance plans over every live session (so a notice for a project goes to the same one
    session whichever actor looks) and pushes only its own session's share. A push is bounded by
    the heartbeat, not by a timer of its own: the actor does not beat between connecting and the
    end of the write, so a socket that accepts but never reads gets this actor (and nothing
    else) cancelled by the watchdog and restarted. The actor object outlives its instances, so
    the next instance knows which socket froze and backs it off like one that refused.
    """

    def __init__(
        self,
        name: str,
        store: StoreLike,
        *,
        clock: Callable[[], float] = time.time,
        connect: Connect = _open_unix,
    ) -> None:
        self.name = name
        self._store = store
        self._clock = clock
        self._connect = connect
        self._failed: dict[str, float] = {}  # socket -> when it last failed
        self._writing: tuple[str, float] | None = None  # a push in flight: socket, since

    async def run(
        self,
        ctx: ActorContext[Nudge],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        if self._writing is not None:  # the last instance froze in a push and was cancelled
            socket, since = self._writing
            self._failed[socket], self._writing = since, None
            log.warning("inbox: %s froze while pushing; the hook will pull", self.name)
        task_status.started()
        while True:
            await self.sweep(beat=ctx.beat)
            ctx.beat()
            with trio.move_on_after(SWEEP):
                await ctx.receive()

    async def sweep(self, *, beat: Callable[[], None] = lambda: None) -> int:
        """Push everything due now to this session; returns how many notices were shown."""
        now = self._clock()
        pending, sessions = await self._store.read(lambda conn: load_pending(conn, now))
        usable = [s for s in sessions if s.name != self.name or not self._backing_off(s, now)]
        mine = [
            push for push in plan(pending, usable, marker=lambda: secrets.token_hex(8))
            if push.session == self.name
        ]
        shown = 0
        for push in mine:
            if not await self._write(push, now):
                self._failed[push.socket] = now
                break  # the rest wait for the hook, or for the socket's backoff to end
            shown += await self._store.write(functools.partial(self._mark, push))
            beat()
        return shown

    def _mark(self, push: Push, conn: sqlite3.Connection) -> int:
        return db.mark_shown(conn, push.ids, push.session, self._clock())

    def _backing_off(self, session: Session, now: float) -> bool:
        failed = self._failed.get(session.inbox_socket or "")
        return failed is not None and now - failed < BACKOFF

    async def _write(self, push: Push, now: float) -> bool:
        line = inbox_line(push, msg_id=str(uuid.uuid4()))  # built before connecting (§6.4)
        # Kept if the watchdog cancels us mid-push (no finally), for the next instance to see.
        self._writing = (push.socket, now)
        try:
            stream = await self._connect(push.socket)
            async with stream:
                await stream.send_all(line)
        except (OSError, trio.BrokenResourceError) as exc:
            self._writing = None
            log.warning("inbox: %s unreachable (%s); the hook will pull", push.session, exc)
            return False
        self._writing = None
        log.debug("inbox: pushed %d notice(s) to %s", len(push.ids), push.session)
        return True


class SessionKeeper:
    """Keeps one :class:`SessionActor` per live session with an inbox socket (the ``inbox``
    actor): starts one when such a session appears, stops it when the session ends or expires,
    and passes every nudge on. ``start`` and ``stop`` are the supervisor's, handed over in the
    one sanctioned place (STYLE rule 9: sessions spawning into the daemon)."""

    def __init__(
        self,
        store: StoreLike,
        *,
        start: Callable[[str], Awaitable[trio.MemorySendChannel[Nudge]]],
        stop: Callable[[str], Awaitable[None]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._start = start
        self._stop = stop
        self._clock = clock
        self._running: dict[str, trio.MemorySendChannel[Nudge]] = {}  # outlives instances

    async def run(
        self,
        ctx: ActorContext[Nudge],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            await self._keep()
            for inbox in self._running.values():
                nudge(inbox)
            ctx.beat()
            with trio.move_on_after(SWEEP):
                await ctx.receive()

    async def _keep(self) -> None:
        now = self._clock()
        live = {s.name for s in await self._store.read(lambda c: pushable_sessions(c, now))}
        for name in [n for n in self._running if n not in live]:
            del self._running[name]
            await self._stop(name)
        for name in sorted(live - self._running.keys()):
            self._running[name] = await self._start(name)
