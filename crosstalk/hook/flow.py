"""What one hook invocation asks the daemon, and the text it hands back to the client.

Theory of operation
-------------------
One :func:`converse` call per hook run, over one control connection with one deadline, and one
request on it: ``hook_event`` (:data:`HOOK_OP`) asks the daemon for steps 1, 2 and 4 and, when
wanted, 3 in one round trip (a daemon older than that op is asked op by op, as the steps name
them). The only other request is ``notice_shown``, after the answer was printed, when it showed
notices:

1. ``session_register`` on every event: it is idempotent by name, keeps ``last_seen`` fresh (the
   attention gate counts a session live by it), and survives a daemon that lost its state.
   Claude Code sessions give their inbox socket, so the daemon can push to them; every client
   that names its transcript file gives it, so ``--slice turns`` can find it.
2. A prompt marks the session ``busy``; a stop marks it ``idle`` (which may surface held
   notices, collected in step 4 when the event can carry them).
3. On an event that can carry text, the working set, exactly once per session: the claim is a
   marker file created with ``O_EXCL`` in the state directory *after* the daemon answered, so a
   daemon that is down hands nothing over and the next event tries again, and two hooks racing
   on one session cannot both claim it.
4. On an event that can carry text, waiting notices (``notices {session, pending, words}``),
   rendered exactly as the inbox push renders them (``crosstalk.core.notice.render_arrivals``):
   no peer words, except that a sender the receiver raised to ``deliver`` has each message
   quoted between fresh random markers. The ids rendered are kept in ``Outcome.shown``, and
   ``notice_shown`` (:func:`mark_shown`) is sent for them only once the answer was printed
   (``crosstalk.hook.main``): a hook killed or cut off before printing leaves them pending for
   the next event. At a session start every sender's notices are one summary (how many of what,
   from whom), however many messages wait and however many batches they surfaced in. Clients
   cut long hook output, so a quote is cut at :data:`QUOTE_LIMIT` characters inside its
   markers, and notices past :data:`ANSWER_LIMIT` characters wait for the next event.
   A session with an inbox socket gets its notices pushed by the daemon; the hook takes only
   those the push left waiting longer than :data:`PUSH_GRACE` (the socket was missing or
   refused), so the two paths do not double up.

5. Edits: a tool event that writes files (``HookEvent.edit_paths``) adds them to the same
   request, with the cwd they are relative to: ``edited`` after the tool ran, ``editing``
   before it runs, whose reply may hold an ``edit_warning`` (``{text, decision}``, read by
   :func:`edit_warning_of` into ``Outcome.edit_warning``). The keys are sent only when there
   are paths. The daemon's converter ignores keys it does not know (checked), but should one
   refuse them as malformed (``protocol_error``), it is asked again without them, so the event
   still registers and brings its notices.

Nothing here raises on a daemon that is down, slow or odd: :class:`Converse` returns what it
got before the failure and the error, and the caller prints a valid answer either way.
Standard library only (see ``crosstalk.hook.main``).
"""

from __future__ import annotations

import os
import time

from crosstalk.core.dialects import EditDecision, EventKind, HookEvent
from crosstalk.core.frozen import Frozen
from crosstalk.errors import CrosstalkError
from crosstalk.hook.control import ControlConnection

TYPE_CHECKING = False  # typing costs the hook start-up time; only the type checker reads these
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from crosstalk.core.notice import Arrival

#: A notice for a push session that is still waiting after this long was not pushed.
PUSH_GRACE = 5.0
#: Where the once-per-session working-set claims live, under the state directory.
CLAIMS_DIR = "hook-sessions"
#: Most characters of one quoted message in an answer. Clients cut long hook output (Cursor
#: drops context past 10,000 characters; Claude Code keeps only a preview past about as many).
QUOTE_LIMIT = 4000
#: Characters of notices one answer carries; what does not fit waits for the next event.
ANSWER_LIMIT = 8000
#: The daemon's one op for a whole hook event (``crosstalk.features.attention.sessions``).
HOOK_OP = "hook_event"


class SessionInfo(Frozen):
    """Who is calling: the session's name, client, project and (Claude Code) inbox socket."""

    __slots__ = ("client", "cwd", "inbox_socket", "name", "project", "transcript_path")
    name: str
    client: str
    project: str
    cwd: str
    inbox_socket: str | None
    transcript_path: str | None

    def __init__(
        self,
        name: str,
        client: str,
        project: str,
        cwd: str,
        inbox_socket: str | None = None,
        transcript_path: str | None = None,
    ) -> None:
        self._init(
            name=name, client=client, project=project, cwd=cwd, inbox_socket=inbox_socket,
            transcript_path=transcript_path,
        )


class Outcome:
    """What the conversation produced: text parts in order, and the first error met."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.error: CrosstalkError | None = None
        #: Notice ids the text shows: marked shown only after the answer is printed.
        self.shown: list[str] = []
        #: What the daemon said about the edit a pre-tool event is about: (text, decision).
        self.edit_warning: tuple[str | None, EditDecision] | None = None

    @property
    def text(self) -> str:
        return "\n\n".join(part.strip("\n") for part in self.parts if part.strip())


def pure_path(text: str) -> str:
    """``str(pathlib.PurePosixPath(text))`` (pathlib costs start-up time)."""
    return _lineage(text)[0]


def _lineage(cwd: str) -> list[str]:
    """``cwd`` and every directory above it, as ``pathlib.PurePosixPath`` spells them (no
    ``..`` resolved, no symlink followed), nearest first; pathlib costs start-up time."""
    root = ""
    if cwd.startswith("/"):
        root = "//" if cwd.startswith("//") and not cwd.startswith("///") else "/"
    parts = [part for part in cwd.split("/") if part and part != "."]
    return [root + "/".join(parts[:n]) or "." for n in range(len(parts), -1, -1)]


def project_of(cwd: str) -> str:
    """The git root above ``cwd`` (a ``.git`` file or directory), else ``cwd`` itself."""
    places = _lineage(cwd)
    for candidate in places:  # pathlib's walk up: Path(cwd), *Path(cwd).parents
        try:
            if os.path.exists(os.path.join(candidate, ".git")):
                return candidate
        except (OSError, ValueError):  # too long for the OS, or a NUL: not a place on disk
            continue
    return places[0]


def claim_path(state_dir: str | os.PathLike[str], session: str) -> str:
    """The marker file that says this session already had its working set.

    The name is the session id in hex (collision-free, safe on any filesystem); an id too long
    for a file name is hashed instead (hashlib is imported only then: it costs start-up time).
    """
    name = session.encode("utf-8", "surrogatepass").hex()
    if len(name) > 200:
        import hashlib

        name = "h" + hashlib.sha256(name.encode()).hexdigest()
    return os.path.join(state_dir, CLAIMS_DIR, name)


def claim_once(state_dir: str | os.PathLike[str], session: str) -> bool:
    """Create the session's marker; True only for the one caller that created it."""
    path = claim_path(state_dir, session)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    except OSError:
        return False  # an unwritable state directory: better no working set than one per event
    os.close(fd)
    return True


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


#: The one batch every notice shown at a session start falls in: one summary per sender.
SUMMARY_BATCH = "session-start"


def arrivals_of(rows: Sequence[Mapping[str, Any]], *, summary: bool = False) -> list[Arrival]:
    """The ``notices`` op's rows as arrivals (rows without an id are skipped).

    With ``summary`` (a session start) every row counts in one batch, so each sender gets one
    notice saying how many of what they sent, not one line per message (a sender raised to
    ``deliver`` still has each message quoted: the receiver asked for their words).
    """
    from crosstalk.core.notice import Arrival  # only when there are notices: see notices_text

    return [
        Arrival(
            message_id=str(row["id"]),
            label=_text(row.get("label")) or _text(row.get("sender")) or "someone",
            from_session=_text(row.get("from_session")),
            kind=str(row.get("kind", "")),
            words=row["words"] if isinstance(row.get("words"), str) else None,
            batch=SUMMARY_BATCH if summary else _text(row.get("batch")),
        )
        for row in rows
        if "id" in row
    ]


def notices_text(
    rows: Sequence[Mapping[str, Any]], *, marker: Callable[[], str], summary: bool = False
) -> tuple[str, list[str]]:
    """Render pending notice rows as the push path does, within :data:`ANSWER_LIMIT`.

    Returns the text and the message ids it shows; the rest stay pending for the next event
    (the first rendered part is always taken, so a long one cannot block the queue).
    """
    # Imported here: most events find no notice waiting, and the renderer's module (its enums,
    # its escape table) is about a millisecond of the hook's start.
    from crosstalk.core.notice import render_arrivals

    taken: list[str] = []
    ids: list[str] = []
    size = 0
    arrivals = arrivals_of(rows, summary=summary)
    for part in render_arrivals(arrivals, marker=marker, limit=QUOTE_LIMIT):
        if taken and size + len(part.text) > ANSWER_LIMIT:
            break
        taken.append(part.text)
        ids += part.ids
        size += len(part.text) + 1
    return "\n".join(taken), ids


def converse(
    conn: ControlConnection,
    info: SessionInfo,
    event: HookEvent,
    *,
    carries_text: bool,
    state_dir: str | os.PathLike[str],
    marker: Callable[[], str],
) -> Outcome:
    """Talk to the daemon for one hook event (see the module docstring); never raises.

    ``marker`` draws a fresh quote marker per quoted message (random hex; tests fix it).
    """
    outcome = Outcome()
    try:
        _converse(conn, info, event, carries_text, state_dir, outcome, marker)
    except CrosstalkError as exc:
        outcome.error = exc
    return outcome


def _ask(conn: ControlConnection, op: str, params: Mapping[str, Any]) -> dict[str, Any]:
    conn.send(op, params)
    return conn.receive()


def edit_keys(event: HookEvent, cwd: str) -> dict[str, Any]:
    """``editing`` (before the tool) or ``edited`` (after it) with ``cwd``; ``{}`` when the
    event writes no file."""
    if not event.edit_paths:
        return {}
    key = "editing" if event.kind is EventKind.BEFORE_TOOL else "edited"
    return {key: list(event.edit_paths), "cwd": cwd}


def edit_warning_of(reply: Mapping[str, Any]) -> tuple[str | None, EditDecision] | None:
    """The reply's ``edit_warning`` as (text, decision); None when it says nothing.

    An unknown decision is ``ALLOW``: a daemon newer than this hook must not block edits with a
    word the hook does not understand.
    """
    warning = reply.get("edit_warning")
    if not isinstance(warning, dict):
        return None
    text = _text(warning.get("text"))
    try:
        decision = EditDecision(warning.get("decision"))
    except ValueError:
        decision = EditDecision.ALLOW
    if text is None and decision is EditDecision.ALLOW:
        return None
    return text, decision


def _converse(
    conn: ControlConnection,
    info: SessionInfo,
    event: HookEvent,
    carries_text: bool,
    state_dir: str | os.PathLike[str],
    outcome: Outcome,
    marker: Callable[[], str],
) -> None:
    register: dict[str, Any] = {"name": info.name, "client": info.client, "project": info.project}
    if info.inbox_socket:
        register["inbox_socket"] = info.inbox_socket
    if info.transcript_path:
        register["transcript_path"] = info.transcript_path
    status = {EventKind.PROMPT: "busy", EventKind.STOP: "idle"}.get(event.kind)
    wants_set = carries_text and not os.path.exists(claim_path(state_dir, info.name))
    asked = dict(register)
    if status is not None:
        asked["status"] = status
    if wants_set:
        asked.update(working_set=True, cwd=info.cwd)
    if carries_text:
        asked["notices"] = True
    edits = edit_keys(event, info.cwd)
    try:
        reply = _ask(conn, HOOK_OP, {**asked, **edits})
    except CrosstalkError as exc:
        if exc.code == "protocol_error" and edits:  # a daemon from before edit awareness
            reply = _ask(conn, HOOK_OP, asked)
        elif exc.code == "unknown_op":
            reply = _one_by_one(conn, info, register, status, wants_set, carries_text)
        else:
            raise
    outcome.edit_warning = edit_warning_of(reply)
    if wants_set and claim_once(state_dir, info.name):
        outcome.parts.append(str(reply.get("working_set") or ""))
    if not carries_text:
        return
    rows = reply.get("notices") or []
    rows = [r for r in rows if isinstance(r, dict)]
    if info.inbox_socket:
        cutoff = time.time() - PUSH_GRACE
        rows = [r for r in rows if float(r.get("surfaced_at") or 0.0) < cutoff]
    if not rows:
        return
    start = event.kind is EventKind.SESSION_START
    text, ids = notices_text(rows, marker=marker, summary=start)
    if ids:
        outcome.parts.append(text)
        outcome.shown = ids


def _one_by_one(
    conn: ControlConnection,
    info: SessionInfo,
    register: Mapping[str, Any],
    status: str | None,
    wants_set: bool,
    carries_text: bool,
) -> dict[str, Any]:
    """What :data:`HOOK_OP` answers, asked op by op (a daemon older than that op)."""
    reply: dict[str, Any] = {}
    _ask(conn, "session_register", register)
    if status is not None:
        _ask(conn, "session_status", {"name": info.name, "status": status})
    if wants_set:
        asked = {"session": info.name, "cwd": info.cwd}
        reply["working_set"] = _ask(conn, "working_set", asked).get("text")
    if carries_text:
        pending = {"session": info.name, "pending": True, "words": True}
        reply["notices"] = _ask(conn, "notices", pending).get("notices")
    return reply


def mark_shown(conn: ControlConnection, info: SessionInfo, ids: Sequence[str]) -> None:
    """Tell the daemon the session was shown ``ids`` (call only once the answer is printed)."""
    if ids:
        _ask(conn, "notice_shown", {"session": info.name, "ids": list(ids)})
