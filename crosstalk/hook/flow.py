"""What one hook invocation asks the daemon, and the text it hands back to the client.

Theory of operation
-------------------
One :func:`converse` call per hook run, over one control connection with one deadline:

1. ``session_register`` on every event: it is idempotent by name, keeps ``last_seen`` fresh (the
   attention gate counts a session live by it), and survives a daemon that lost its state.
   Claude Code sessions give their inbox socket, so the daemon can push to them.
2. A prompt marks the session ``busy``; a stop marks it ``idle`` (which may surface held
   notices, collected in step 4 when the event can carry them).
3. On an event that can carry text, the working set, exactly once per session: the claim is a
   marker file created with ``O_EXCL`` in the state directory *after* the daemon answered, so a
   daemon that is down hands nothing over and the next event tries again, and two hooks racing
   on one session cannot both claim it.
4. On an event that can carry text, waiting notices (``notices {session, pending}``), rendered
   without peer words, then ``notice_shown``. A session with an inbox socket gets its notices
   pushed by the daemon; the hook takes only those the push left waiting longer than
   :data:`PUSH_GRACE` (the socket was missing or refused), so the two paths do not double up.

Nothing here raises on a daemon that is down, slow or odd: :class:`Converse` returns what it
got before the failure and the error, and the caller prints a valid answer either way.
Standard library only (see ``crosstalk.hook.main``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crosstalk.core.dialects import EventKind, HookEvent
from crosstalk.core.notice import Notice, NoticeKind, render_notices
from crosstalk.errors import CrosstalkError
from crosstalk.hook.control import ControlConnection

#: A notice for a push session that is still waiting after this long was not pushed.
PUSH_GRACE = 5.0
#: Where the once-per-session working-set claims live, under the state directory.
CLAIMS_DIR = "hook-sessions"
#: Notice kinds as the gate records them (the op's kind) -> how a notice phrases them.
_KINDS = {
    "message": NoticeKind.MESSAGE,
    "ask": NoticeKind.QUESTION,
    "question": NoticeKind.QUESTION,
    "handoff": NoticeKind.HANDOFF,
    "answer": NoticeKind.ANSWER,
    "invitation": NoticeKind.INVITATION,
}


@dataclass(frozen=True)
class SessionInfo:
    """Who is calling: the session's name, client, project and (Claude Code) inbox socket."""

    name: str
    client: str
    project: str
    cwd: str
    inbox_socket: str | None = None


@dataclass
class Outcome:
    """What the conversation produced: text parts in order, and the first error met."""

    parts: list[str] = field(default_factory=list)
    error: CrosstalkError | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(part.strip("\n") for part in self.parts if part.strip())


def project_of(cwd: str) -> str:
    """The git root above ``cwd`` (a ``.git`` file or directory), else ``cwd`` itself."""
    here = Path(cwd)
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return str(candidate)
    return str(here)


def claim_path(state_dir: Path, session: str) -> Path:
    """The marker file that says this session already had its working set.

    The name is the session id in hex (collision-free, safe on any filesystem); an id too long
    for a file name is hashed instead (hashlib is imported only then: it costs start-up time).
    """
    name = session.encode("utf-8", "surrogatepass").hex()
    if len(name) > 200:
        import hashlib

        name = "h" + hashlib.sha256(name.encode()).hexdigest()
    return state_dir / CLAIMS_DIR / name


def claim_once(state_dir: Path, session: str) -> bool:
    """Create the session's marker; True only for the one caller that created it."""
    path = claim_path(state_dir, session)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return False  # an unwritable state directory: better no working set than one per event
    os.close(fd)
    return True


def notices_text(rows: Sequence[Mapping[str, Any]]) -> tuple[str, list[str]]:
    """Render pending notice rows (the ``notices`` op's) one notice per batch and sender.

    Returns the text and the message ids it covers.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (str(row.get("batch") or row.get("id")), str(row.get("sender", "")))
        groups.setdefault(key, []).append(row)
    notices = []
    for items in groups.values():
        first = items[0]
        sessions = {str(r.get("from_session") or "") for r in items}
        kinds = {_KINDS.get(str(r.get("kind", "")), NoticeKind.MESSAGE) for r in items}
        notices.append(
            Notice(
                sender=str(first.get("label") or first.get("sender") or "someone"),
                session=(sessions.pop() or None) if len(sessions) == 1 else None,
                kind=kinds.pop() if len(kinds) == 1 else NoticeKind.MESSAGE,
                count=len(items),
            )
        )
    ids = [str(row["id"]) for row in rows if "id" in row]
    return render_notices(notices), ids


def converse(
    conn: ControlConnection,
    info: SessionInfo,
    event: HookEvent,
    *,
    carries_text: bool,
    state_dir: Path,
) -> Outcome:
    """Talk to the daemon for one hook event (see the module docstring); never raises."""
    outcome = Outcome()
    try:
        _converse(conn, info, event, carries_text, state_dir, outcome)
    except CrosstalkError as exc:
        outcome.error = exc
    return outcome


def _ask(conn: ControlConnection, op: str, params: Mapping[str, Any]) -> dict[str, Any]:
    conn.send(op, params)
    return conn.receive()


def _converse(
    conn: ControlConnection,
    info: SessionInfo,
    event: HookEvent,
    carries_text: bool,
    state_dir: Path,
    outcome: Outcome,
) -> None:
    register: dict[str, Any] = {"name": info.name, "client": info.client, "project": info.project}
    if info.inbox_socket:
        register["inbox_socket"] = info.inbox_socket
    _ask(conn, "session_register", register)
    if event.kind is EventKind.PROMPT:
        _ask(conn, "session_status", {"name": info.name, "status": "busy"})
    elif event.kind is EventKind.STOP:
        _ask(conn, "session_status", {"name": info.name, "status": "idle"})
    if not carries_text:
        return
    if not claim_path(state_dir, info.name).exists():
        reply = _ask(conn, "working_set", {"session": info.name, "cwd": info.cwd})
        if claim_once(state_dir, info.name):
            outcome.parts.append(str(reply.get("text") or ""))
    rows = _ask(conn, "notices", {"session": info.name, "pending": True}).get("notices") or []
    rows = [r for r in rows if isinstance(r, dict)]
    if info.inbox_socket:
        cutoff = time.time() - PUSH_GRACE
        rows = [r for r in rows if float(r.get("surfaced_at") or 0.0) < cutoff]
    if rows:
        text, ids = notices_text(rows)
        outcome.parts.append(text)
        _ask(conn, "notice_shown", {"session": info.name, "ids": ids})
