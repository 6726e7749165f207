"""Claude Code inbox delivery: push surfaced notices into a session's inbox socket, mid-turn.

How it fits: the attention gate decides what reaches which session and marks it *surfaced* in
the ``notices`` table (at once for ``question``/``blocking``, when the session goes idle for
``fyi``). This actor delivers what is surfaced and not yet shown to sessions that registered a
Claude Code inbox socket, then marks it *shown*. Everything else, and anything whose push failed,
stays waiting for the session's hook to pull (``crosstalk.hook.flow``, which leaves a push
session's notices to this actor for a short grace period). So the two paths meet only through
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

When: after every room commit (a nudge from ``daemon.applied_listeners``) and every
:data:`SWEEP` seconds, which also catches what the gate surfaces when a session goes idle.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import trio

from crosstalk.actors.context import ActorContext
from crosstalk.actors.control import OpTable
from crosstalk.actors.gate import StoreLike
from crosstalk.core.notice import Arrival, escape_text, render_arrivals
from crosstalk.core.room import Applied
from crosstalk.core.triage import Decision, SessionStatus
from crosstalk.daemon import Daemon
from crosstalk.store import attention as db
from crosstalk.store.sessions import Session, list_sessions

log = logging.getLogger(__name__)

SWEEP = 1.0
"""Seconds between looks at the notices table when nothing nudges the actor."""
WRITE_TIMEOUT = 2.0
"""Seconds to connect and write one message; Claude Code closes idle connections after 30."""
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


def load_pending(conn: sqlite3.Connection, now: float) -> tuple[list[Pending], list[Session]]:
    """Surfaced, unshown notices, and the live sessions that have an inbox socket."""
    sessions = [
        s
        for s in sorted(list_sessions(conn), key=lambda s: s.last_seen, reverse=True)
        if s.inbox_socket and now - s.last_seen < SESSION_TTL
    ]
    if not sessions:
        return [], []
    rows = conn.execute(
        "SELECT n.message_id, n.session, n.target, n.label, n.from_session, n.kind, n.decision, "
        "n.batch, h.body FROM notices n LEFT JOIN held_messages h ON h.message_id = n.message_id "
        "WHERE n.surfaced_at IS NOT NULL AND n.shown_at IS NULL AND n.withdrawn_at IS NULL "
        "AND n.surfaced_at > ? "
        "ORDER BY n.created_at, n.id",
        (now - HORIZON,),
    ).fetchall()
    return [_pending(*row) for row in rows], sessions


def _pending(
    message_id: str,
    session: str | None,
    target: str | None,
    label: str,
    from_session: str | None,
    kind: str,
    decision: str,
    batch: str | None,
    body: str | None,
) -> Pending:
    words = quoted_words(decision, body)
    return Pending(message_id, session, target, label, from_session, kind, words, batch)


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


# --- the actor -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Nudge:
    """Something was committed: look at the notices table now."""


class InboxActor:
    """Delivers surfaced notices to inbox sockets (see the module docstring)."""

    def __init__(self, store: StoreLike, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._clock = clock
        self._failed: dict[str, float] = {}  # socket -> when it last failed

    async def run(
        self,
        ctx: ActorContext[Nudge],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            await self.sweep(beat=ctx.beat)
            ctx.beat()
            with trio.move_on_after(SWEEP):
                await ctx.receive()

    async def sweep(self, *, beat: Callable[[], None] = lambda: None) -> int:
        """Push everything due now; returns how many notices were shown.

        ``beat`` is called after each push, so a sweep through several slow sockets (each
        bounded by :data:`WRITE_TIMEOUT`) never looks like a stuck actor to the watchdog.
        """
        now = self._clock()
        pending, sessions = await self._store.read(lambda conn: load_pending(conn, now))
        usable = [s for s in sessions if not self._backing_off(s.inbox_socket, now)]
        shown = 0
        for push in plan(pending, usable, marker=lambda: secrets.token_hex(8)):
            if self._backing_off(push.socket, now):
                continue  # failed earlier in this sweep
            if await self._write(push):
                shown += await self._store.write(functools.partial(self._mark, push))
            else:
                self._failed[push.socket] = now
            beat()
        return shown

    def _mark(self, push: Push, conn: sqlite3.Connection) -> int:
        return db.mark_shown(conn, push.ids, push.session, self._clock())

    def _backing_off(self, socket: str | None, now: float) -> bool:
        failed = self._failed.get(socket or "")
        return failed is not None and now - failed < BACKOFF

    async def _write(self, push: Push) -> bool:
        line = inbox_line(push, msg_id=str(uuid.uuid4()))  # built before connecting (§6.4)
        try:
            with trio.fail_after(WRITE_TIMEOUT):
                stream = await trio.open_unix_socket(push.socket)
                async with stream:
                    await stream.send_all(line)
        except (OSError, trio.TooSlowError, trio.BrokenResourceError) as exc:
            log.warning("inbox: %s unreachable (%s); the hook will pull", push.session, exc)
            return False
        log.debug("inbox: pushed %d notice(s) to %s", len(push.ids), push.session)
        return True


def register(ops: OpTable, daemon: Daemon) -> None:
    """Start the inbox actor with the daemon and nudge it after every room commit (no ops)."""
    del ops  # nothing to serve: the hook and the gate meet this actor through the table
    inbox: list[trio.MemorySendChannel[Nudge]] = []

    async def start() -> None:
        inbox.append(await daemon.supervisor.start_actor("inbox", InboxActor(daemon.store)))

    async def on_applied(applied: list[Applied]) -> None:
        if inbox:
            try:
                inbox[0].send_nowait(Nudge())
            except trio.WouldBlock:
                pass  # a nudge is already waiting; one is enough

    daemon.on_start.append(start)
    daemon.applied_listeners.append(on_applied)
    daemon.local_listeners.append(on_applied)
