"""``crosstalk-hook``: one short process per agent event, answering in the client's own dialect.

Usage: ``crosstalk-hook [--client C] [EVENT]`` (also ``crosstalk hook``), the client's JSON on
stdin. It prints exactly one answer on stdout, in that client's dialect
(``crosstalk.core.dialects``), and nothing else; diagnostics go to stderr.

Exit status (documented for the installers and ``doctor``):

- ``0``: answered. When the daemon could not be reached in time the answer is the client's empty
  one and stderr says why; that is a normal state (the daemon is started for the next event),
  not a failure of the agent's turn.
- ``1``: only when the client closed our stdout, so no answer could be written. Whatever the
  input, and even when crosstalk itself fails (a bug, said on stderr), the status is ``0`` with
  a valid empty answer: clients log any non-zero exit as a failed hook.
- ``3``: the command line was wrong (an unknown ``--client``). stdout carries ``{}``.

Never ``2``: Claude Code treats exit 2 from a prompt hook as "block this prompt".

Speed is a promise: the import path is the standard library plus ``crosstalk.hook``,
``crosstalk.errors``, ``crosstalk.core.frozen`` and ``crosstalk.core.dialects`` (with the one
client's module), and ``crosstalk.core.notice`` only when notices wait to be shown; stdin is
read under a deadline; every socket operation shares one deadline, :data:`BUDGET` seconds from
start, so even a daemon that accepts and never answers costs about a second.
"""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable, Sequence

from crosstalk.core.dialects import (
    Dialect,
    EventKind,
    HookEvent,
    detect_client,
    dialect_for,
)
from crosstalk.errors import CrosstalkError, DaemonUnreachable, LocalProtocolError
from crosstalk.hook import pending
from crosstalk.hook.control import ControlConnection
from crosstalk.hook.flow import (
    Outcome,
    SessionInfo,
    converse,
    mark_shown,
    project_of,
    pure_path,
)

TYPE_CHECKING = False  # typing costs the hook start-up time; only the type checker reads these
if TYPE_CHECKING:
    from typing import Protocol

    class Spawn(Protocol):
        """``os.posix_spawn``'s shape (tests pass a recorder)."""

        def __call__(
            self,
            path: str,
            argv: list[str],
            env: dict[str, str],
            /,
            *,
            file_actions: list[tuple[int, int, str, int, int]],
            setsid: bool,
        ) -> int: ...

    class Rooted(Protocol):
        """A state directory: :class:`HookHome`, or ``crosstalk.paths.Home``."""

        @property
        def root(self) -> str | os.PathLike[str]: ...


#: Seconds from start within which the daemon must have answered everything.
BUDGET = 0.8
#: Seconds to wait for stdin to close (clients write it at once).
STDIN_WAIT = 0.4
MAX_STDIN = 4 * 1024 * 1024
EXIT_OK, EXIT_BUG, EXIT_USAGE = 0, 1, 3
#: Environment variables that name the session when the payload does not.
SESSION_ENV = ("CLAUDE_CODE_SESSION_ID", "ANTIGRAVITY_CONVERSATION_ID")
INBOX_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"
#: Seconds between two attempts by hooks to start the daemon of one state directory.
RESTART_EVERY = 10.0
#: ``crosstalk.paths.HOME_ENV`` (that module imports pathlib; a test keeps the two equal).
HOME_ENV = "CROSSTALK_HOME"


class HookHome:
    """The files of the state directory the hook uses: ``crosstalk.paths.Home`` in strings."""

    __slots__ = ("identity", "root", "socket")

    def __init__(self, root: str) -> None:
        self.root = root
        self.socket = os.path.join(root, "daemon.sock")
        self.identity = os.path.join(root, "identity.json")

    @classmethod
    def resolve(cls) -> HookHome:
        """``Home.resolve()``: ``CROSSTALK_HOME``, else ``~/.crosstalk``, made absolute."""
        chosen = os.environ.get(HOME_ENV) or os.path.join(os.path.expanduser("~"), ".crosstalk")
        chosen = os.path.expanduser(chosen)
        if not chosen.startswith("/"):
            chosen = os.path.join(os.getcwd(), chosen)
        return cls(pure_path(chosen))


class Usage(Exception):
    """The command line could not be understood."""


#: Writes the answer where the client reads it; False when it could not be written.
Emit = Callable[[str], bool]


def returned(_text: str) -> bool:
    """The default :data:`Emit`: the caller prints what :func:`run` returns (tests do)."""
    return True


class _Once:
    """An :data:`Emit` that writes at most once and remembers whether it did."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self.done: bool | None = None  # None: nothing written yet

    def __call__(self, text: str) -> bool:
        if self.done is None:
            self.done = self._emit(text)
        return self.done


def parse_argv(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """``(event, client)`` from ``[--client C] [EVENT]`` in any order."""
    event: str | None = None
    client: str | None = None
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--client":
            if not args:
                raise Usage("--client needs a client name")
            client = args.pop(0)
        elif arg.startswith("--client="):
            client = arg.partition("=")[2]
        elif arg.startswith("-"):
            raise Usage(f"unknown option {arg}")
        elif event is None:
            event = arg
        else:
            raise Usage(f"unexpected argument {arg}")
    return event, client


def read_stdin(deadline: float) -> str:
    """Whatever arrives on stdin before it closes or ``deadline`` passes (bounded in size)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return ""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_STDIN:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            ready, _, _ = select.select([fd], [], [], left)
            chunk = os.read(fd, 65536) if ready else b""
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def session_info(event: HookEvent, client: str) -> SessionInfo | None:
    """Who this event is for, or None when nothing names a session."""
    name = event.session_id or next((os.environ[k] for k in SESSION_ENV if os.environ.get(k)), None)
    if not name:
        return None
    cwd = event.cwd or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    inbox = os.environ.get(INBOX_ENV) if client == "claude" else None
    return SessionInfo(
        name=name,
        client=client,
        project=project_of(cwd),
        cwd=cwd,
        inbox_socket=inbox or None,
        transcript_path=event.transcript_path,
    )


def new_marker() -> str:
    """A fresh quote marker: 16 random hex digits (``os.urandom``: ``secrets`` costs imports)."""
    return os.urandom(8).hex()


def start_daemon_detached(home: Rooted, *, spawn: Spawn = os.posix_spawn) -> None:
    """Start the daemon for the next event without waiting for it (a lock keeps it single).

    At most once per :data:`RESTART_EVERY` seconds per state directory (a stamp file says when
    a hook last tried), so a burst of events while it starts, or a daemon that keeps refusing
    to start, does not fork one process per event.
    """
    root = os.fspath(home.root)
    stamp = os.path.join(root, "hook-started-daemon")
    try:
        if time.time() - os.stat(stamp).st_mtime < RESTART_EVERY:
            return
    except OSError:
        pass  # no stamp yet
    argv = [
        sys.executable,
        "-m",
        "crosstalk",
        "daemon",
        "run",
        "--detach",
        "--home",
        root,
    ]
    quiet = [
        (os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)
    ]  # stdout is the client's: the daemon must not write there
    try:
        os.close(os.open(stamp, os.O_WRONLY | os.O_CREAT, 0o600))
        os.utime(stamp)
        # posix_spawn, not subprocess: nothing more to import, no Popen object to outlive us,
        # and setsid detaches the daemon from the client's process group.
        spawn(sys.executable, argv, dict(os.environ), file_actions=quiet, setsid=True)
    except OSError as exc:
        warn(f"could not start the daemon ({exc})")


def warn(text: str) -> None:
    try:
        sys.stderr.write(f"crosstalk-hook: {text}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr closed: there is nobody to tell


def answer(
    dialect: Dialect,
    event: HookEvent,
    home: HookHome,
    started: float,
    marker: Callable[[], str] = new_marker,
    emit: Emit = returned,
) -> str:
    """The text for one parsed event, talking to the daemon if it makes sense.

    The answer is handed to ``emit`` while the daemon connection is still open; notices it
    shows are marked shown only when ``emit`` says it was written, so an answer that never
    reached the client leaves them pending for the next event. Edit warnings kept for this
    session (``crosstalk.hook.pending``) ride along the same way.

    A pre-tool event that writes no file is answered at once, without the daemon: only edits
    have anything to ask it (clients without tool matchers run the hook before every tool).
    """
    if event.kind is EventKind.BEFORE_TOOL and not event.edit_paths:
        return dialect.render_before_tool(event, None)
    info = session_info(event, dialect.client)
    if info is None or not os.path.exists(home.identity):
        return dialect.render(event, None)  # not set up, or no session: nothing to say
    carries = dialect.can_carry_text(event)
    try:
        conn = ControlConnection(
            home.socket, timeout=max(0.05, started + BUDGET - time.monotonic())
        )
    except DaemonUnreachable as exc:
        warn(exc.message)
        start_daemon_detached(home)
        return dialect.render(event, None)
    with conn:
        outcome = converse(
            conn, info, event, carries_text=carries, state_dir=home.root, marker=marker
        )
        if event.kind is EventKind.BEFORE_TOOL:
            text = before_tool_answer(dialect, event, outcome, info, home)
            emit(text)
        else:
            taken = pending.take(home.root, info.name) if carries else None
            if taken is not None and taken.texts:
                outcome.parts.append(taken.text)
            text = dialect.render(event, outcome.text or None)
            written = emit(text)
            if taken is not None:
                pending.settle(home.root, info.name, taken, shown=written)
            if written and outcome.error is None and outcome.shown:
                try:
                    mark_shown(conn, info, outcome.shown)
                except CrosstalkError as exc:  # shown but not marked: they come again, not lost
                    outcome.error = exc
    if outcome.error is not None:
        warn(outcome.error.message)
    return text


def before_tool_answer(
    dialect: Dialect, event: HookEvent, outcome: Outcome, info: SessionInfo, home: HookHome
) -> str:
    """The pre-tool answer for the daemon's ``edit_warning`` (none: the empty, allowing one).

    A warning whose text this client's answer does not put in front of the model is kept for
    the session's next event that carries text (see ``crosstalk.hook.pending``).
    """
    if outcome.edit_warning is None:
        return dialect.render_before_tool(event, None)
    text, decision = outcome.edit_warning
    if text and not dialect.before_tool_reaches_model(event, decision):
        pending.keep(home.root, info.name, text)
    return dialect.render_before_tool(event, text, decision)


def run(
    argv: Sequence[str],
    started: float,
    stdin: str | None = None,
    *,
    marker: Callable[[], str] = new_marker,
    emit: Emit = returned,
) -> tuple[str, int]:
    """``(stdout text, exit status)`` for one invocation; never raises.

    ``stdin`` is the client's payload; None reads it from the process's stdin. ``marker`` draws
    quote markers (tests pass a fixed one for exact answers). ``emit`` writes the answer, once,
    before notices are marked shown (``main`` writes to stdout; by default the caller prints
    the text returned).
    """
    once = _Once(emit)
    text, status = _run(argv, started, stdin, marker, once)
    if not once(text):  # a no-op when the answer was already written
        status = EXIT_BUG  # the client closed our stdout; nothing more we can do
    return text, status


def _run(
    argv: Sequence[str],
    started: float,
    stdin: str | None,
    marker: Callable[[], str],
    emit: Emit,
) -> tuple[str, int]:
    try:
        argv_event, client = parse_argv(argv)
        if stdin is None:
            stdin = read_stdin(started + STDIN_WAIT)
        dialect = dialect_for(client or detect_client(argv_event, stdin))
    except (Usage, LocalProtocolError) as exc:
        warn(str(exc))
        return "{}", EXIT_USAGE
    event = dialect.parse(argv_event, stdin)
    try:
        return answer(dialect, event, HookHome.resolve(), started, marker, emit), EXIT_OK
    except CrosstalkError as exc:
        warn(exc.message)
        return dialect.render(event, None), EXIT_OK
    except Exception as exc:  # the promise is a valid answer and status 0, whatever broke
        warn(f"internal error: {type(exc).__name__}: {str(exc)[:300]}")
        return dialect.render(event, None), EXIT_OK


def write_stdout(text: str) -> bool:
    """The program's :data:`Emit`: the answer on stdout, flushed; False if stdout is closed."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError):
        return False
    return True


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: print the answer, exit with the documented status."""
    started = time.monotonic()
    _, status = run(sys.argv[1:] if argv is None else argv, started, emit=write_stdout)
    raise SystemExit(status)


if __name__ == "__main__":
    main()
