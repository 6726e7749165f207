"""send → pushed into a busy Claude Code session: the line in its inbox socket, and the MCP
channel notification. The push figures of issue 41.

Used by ``bench.latency`` (same two daemons, same run, next to send → held). Two ways a message
reaches an attached Claude Code session mid-turn without waiting for its next tool call, each
timed on its own session so that they never race for the same notice:

*Inbox socket* (``features/inbox``). Claude Code listens on a Unix socket and names it to its
hooks as ``CLAUDE_CODE_MESSAGING_SOCKET``; the real hook program registers it with the daemon at
``SessionStart``. Here this process listens on that socket (:class:`InboxListener`: it reads
what the daemon's ``session-<name>`` actor writes, as Claude Code does) and the session is
registered and marked busy through the real hook program with the variable set. Per message:
from just before the sender's control-socket ``send`` (intent ``question``, which the gate
surfaces at once to a busy session) until the pushed JSON line has arrived whole.

*Channel* (``crosstalk/mcp/channel.py``). Claude Code spawns the MCP server its config names,
``crosstalk server``; with ``CROSSTALK_CHANNELS=1`` the server declares the ``claude/channel``
capability and sends ``notifications/claude/channel`` on its stdout. Here the same command
(:func:`crosstalk.install.base.resolve_commands`, as the installer writes it) runs on pipes and
is opened as Claude Code opens it: ``initialize``, ``notifications/initialized``,
``tools/list``. Claude Code itself is not run: it is not installed on the bench machine, and an
attached session needs a model and a claude.ai login before it loads a channel; what it would
run is this server process, whose stdout is what it reads. Per message: from just before the
``send`` until the notification naming the message's id is read from the server's stdout.

Both pushes look for work after each arrival (the inbox actor is nudged by the fan-out, the
channel by a ``wait`` it keeps open on the daemon) and the channel also every
:data:`~crosstalk.mcp.channel.SWEEP` seconds, so before each send we wait a random fraction of
that period: sending right after the previous arrival would line every send up with the same
point of the channel's fallback period. Each message's
``surfaced_at`` (the recipient's gate stamps it) is kept too, so the figures split into the
path to the gate and the push after it. Stamps are wall clock (``time.time()``), the same clock
as the daemons' on one machine; a reader thread stamps each line as it arrives.
"""

from __future__ import annotations

import json
import queue
import random
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from bench.notice import hook_env, run_hook
from crosstalk.client import call
from crosstalk.install.base import resolve_commands
from crosstalk.mcp.channel import METHOD, SWEEP
from crosstalk.paths import Home
from crosstalk.store.ids import to_db

INBOX_SESSION = "bench-push-inbox"
CHANNEL_SESSION = "bench-push-channel"
MESSAGING_ENV = "CLAUDE_CODE_MESSAGING_SOCKET"  # crosstalk.hook.main.INBOX_ENV
#: Seconds a message may take to be pushed before the benchmark gives up.
PUSH_TIMEOUT = 30.0
#: A Claude Code session's opening of a stdio MCP server: the ``initialize`` handshake (legacy
#: era), then the tools. The server reads nothing from the client's capabilities or name, so
#: whatever version of Claude Code sends these, it pushes the same.
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {}},
               "clientInfo": {"name": "claude-code", "version": "2.1.197"}},
}

Stamped = tuple[float, str]


class Arrivals:
    """Lines a reader thread saw, each with the wall-clock time it arrived whole."""

    def __init__(self) -> None:
        self._lines: queue.SimpleQueue[Stamped] = queue.SimpleQueue()

    def put(self, line: str) -> None:
        self._lines.put((time.time(), line))

    def wait_for(self, wanted: Callable[[str], bool], what: str, *, after: float = 0.0,
                 timeout: float = PUSH_TIMEOUT) -> Stamped:
        """The first line ``wanted`` accepts that arrived after ``after`` (others are
        dropped: a line that came before a send cannot be its push), with its arrival time."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                stamped = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"no {what} within {timeout} s") from None
            if stamped[0] >= after and wanted(stamped[1]):
                return stamped


class InboxListener:
    """A Unix socket listening where Claude Code's messaging socket would: every line written
    to it, stamped. The daemon connects once per push, writes one line and closes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.arrivals = Arrivals()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> InboxListener:
        self._server.bind(str(self.path))
        self._server.listen(8)
        self._server.settimeout(0.1)  # accept wakes at once for a client; this bounds the stop
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()
        self.path.unlink(missing_ok=True)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5.0)
                self._read(conn)

    def _read(self, conn: socket.socket) -> None:
        pending = b""
        while True:
            try:
                chunk = conn.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                self.arrivals.put(line.decode("utf-8", "replace"))


class ChannelServer:
    """``crosstalk server`` with channels on, on pipes, as Claude Code spawns it for a session;
    every stdout line stamped by a reader thread."""

    def __init__(self, home: Home, session: str, project: Path) -> None:
        env = {**hook_env(home), "CROSSTALK_CHANNELS": "1", "CLAUDE_CODE_SESSION_ID": session,
               "CLAUDE_PROJECT_DIR": str(project)}
        self.proc = subprocess.Popen(
            [*resolve_commands().crosstalk, "server"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=project,
        )
        assert self.proc.stdout is not None
        self.arrivals = Arrivals()
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            self.arrivals.put(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def open(self) -> dict[str, Any]:
        """The opening as Claude Code makes it; the capabilities the server declared."""
        self.send(INITIALIZE)
        _, reply = self.arrivals.wait_for(lambda line: json.loads(line).get("id") == 1,
                                          "initialize reply")
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        self.arrivals.wait_for(lambda line: json.loads(line).get("id") == 2, "tools/list reply")
        capabilities: dict[str, Any] = json.loads(reply)["result"]["capabilities"]
        return capabilities

    def close(self) -> None:
        """End stdin, as a client that quits does; the server exits (killed past a bound)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._reader.join(timeout=5)


def clear_pending(home: Home, session: str) -> None:
    """Mark every surfaced, unshown notice shown, so that a push phase sees only its own."""
    pending = call(home, "notices", {"pending": True})["notices"]
    if pending:
        call(home, "notice_shown", {"session": session, "ids": [n["id"] for n in pending]})


def _notice_times(db: Path, message_id: str, timeout: float = 5.0) -> tuple[float, float]:
    """(surfaced_at, shown_at) of ``message_id``'s notice, once it is shown (bounded poll: the
    push marks it shown just after its write)."""
    deadline = time.monotonic() + timeout
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        while True:
            row = conn.execute("SELECT min(surfaced_at), min(shown_at) FROM notices "
                               "WHERE message_id = ?", (to_db(message_id),)).fetchone()
            if row is not None and row[1] is not None:
                return float(row[0]), float(row[1])
            if time.monotonic() > deadline:
                raise TimeoutError(f"the notice of {message_id} was pushed but never shown")
            time.sleep(0.001)
    finally:
        conn.close()


def _timed(sender: Home, recipient: Home, to: str, count: int, rng: random.Random,
           arrived: Callable[[str, float], float]) -> dict[str, list[float]]:
    """Send ``count`` questions one at a time, each after a random pause of up to one sweep;
    per message, seconds to the push (``arrived(id, sent_at)`` returns its arrival time) and to
    the notice's surfacing."""
    pushed: list[float] = []
    surfaced: list[float] = []
    for i in range(count):
        time.sleep(rng.uniform(0.0, SWEEP))
        start = time.time()
        reply = call(sender, "send", {"to": to, "text": f"push {i}", "intent": "question"})
        message_id = str(reply["id"])
        pushed.append(arrived(message_id, start) - start)
        surfaced.append(_notice_times(recipient.database, message_id)[0] - start)
    return {"pushed": pushed, "surfaced": surfaced}


def inbox_latency(sender: Home, recipient: Home, to: str, sender_label: str, count: int,
                  project: Path, *, warmup: int = 2, seed: int = 41) -> dict[str, list[float]]:
    """Send → the pushed line in a busy session's inbox socket, ``count`` times (after
    ``warmup`` untimed ones)."""
    path = project / "claude-inbox.sock"  # the bench's projects sit in /tmp: a short path
    with InboxListener(path) as listener:
        env = {MESSAGING_ENV: str(path)}
        run_hook(recipient, "SessionStart", project, session=INBOX_SESSION, env=env)
        run_hook(recipient, "UserPromptSubmit", project, session=INBOX_SESSION, env=env)
        clear_pending(recipient, INBOX_SESSION)

        def arrived(message_id: str, sent_at: float) -> float:
            at, _ = listener.arrivals.wait_for(
                lambda line: _inbox_line_from(line, path, sender_label), "inbox line",
                after=sent_at)
            _notice_times(recipient.database, message_id)  # that line showed this message
            return at

        rng = random.Random(seed)
        _timed(sender, recipient, to, warmup, rng, arrived)
        return _timed(sender, recipient, to, count, rng, arrived)


def _inbox_line_from(line: str, path: Path, sender_label: str) -> bool:
    """Whether ``line`` is an inbox message for the socket at ``path`` naming the sender."""
    body = json.loads(line)
    return (body.get("type") == "user" and body.get("from") == f"uds:{path}"
            and sender_label in body["message"]["content"])


def channel_latency(sender: Home, recipient: Home, to: str, count: int, project: Path, *,
                    warmup: int = 2, seed: int = 42) -> dict[str, list[float]]:
    """Send → the channel notification on a busy session's ``crosstalk server`` stdout,
    ``count`` times (after ``warmup`` untimed ones)."""
    run_hook(recipient, "SessionStart", project, session=CHANNEL_SESSION)
    run_hook(recipient, "UserPromptSubmit", project, session=CHANNEL_SESSION)
    clear_pending(recipient, CHANNEL_SESSION)
    server = ChannelServer(recipient, CHANNEL_SESSION, project)
    try:
        if "claude/channel" not in server.open().get("experimental", {}):
            raise RuntimeError("crosstalk server did not declare the claude/channel capability")

        def arrived(message_id: str, sent_at: float) -> float:
            at, _ = server.arrivals.wait_for(
                lambda line: _notification_of(line, message_id), "channel notification",
                after=sent_at)
            return at

        rng = random.Random(seed)
        _timed(sender, recipient, to, warmup, rng, arrived)
        return _timed(sender, recipient, to, count, rng, arrived)
    finally:
        server.close()


def _notification_of(line: str, message_id: str) -> bool:
    body = json.loads(line)
    if body.get("method") != METHOD:
        return False
    return message_id in str(body["params"]["meta"]["ids"]).split(",")
