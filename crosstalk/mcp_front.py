"""``crosstalk server``'s front end: ``initialize`` and ``tools/list`` answered at once (stdlib).

Importing the MCP SDK (pydantic, starlette, anyio, the generated types) takes most of a second on
a quiet machine and several on a loaded one, and a client waits for ``initialize`` before it
lists tools or starts the agent's turn. So the process starts here: it takes the client's stdin
and stdout, starts one thread that reads stdin, and only then imports the SDK
(:mod:`crosstalk.mcp_server`) on the main thread. Until the SDK serves, the reader answers the
two requests every client sends first from :data:`LISTING` (``mcp_front.json``, written from the
SDK's own answers by ``python -m crosstalk.mcp_listing --write-front``; ``tests/test_mcp_front.py``
fails if the file and the SDK ever disagree, for every protocol version and both channel
settings):

- ``initialize``: answered, then passed on to the SDK under a private id (:data:`PRIVATE`), so
  the SDK's session is initialized like any other; its own answer to that id is dropped on the
  way out (:class:`Wire`);
- ``tools/list`` (no cursor), once ``initialize`` was answered here: answered, not passed on.

Every other line, and any of those two the front end does not answer exactly as the SDK would
(odd params, a second ``initialize``, a line that does not parse), is queued in arrival order and
handed to the SDK when it is ready: nothing is lost and the SDK sees the stream in order. After
the hand-over every line goes to the SDK. Both writers share one lock and write whole lines.

Like the SDK's own stdio transport, fds 0 and 1 point at the null device and stderr while
serving, so stray prints and children never touch the wire.
"""

from __future__ import annotations

import io
import json
import os
import queue
import sys
import threading
from collections.abc import Mapping
from typing import Any

LISTING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mcp_front.json")
"""The SDK's answers, committed: ``versions``, ``latest``, ``initialize`` and ``tools``."""
PRIVATE = "crosstalk-front-"
"""Prefix of the ids under which requests answered here are passed on to the SDK."""
CHANNELS_ENV = "CROSSTALK_CHANNELS"
CHANNEL_CAPABILITY = "claude/channel"


def channels_enabled(env: Mapping[str, str]) -> bool:
    """Whether the person turned channel pushes on (:mod:`crosstalk.mcp_channel`)."""
    return env.get(CHANNELS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def load_listing(path: str = LISTING) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        listing: dict[str, Any] = json.load(f)
    return listing


class Wire:
    """The client's stdout: whole lines under one lock; the SDK's answers to ids of
    :data:`PRIVATE` (requests answered here already) are dropped."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._lock = threading.Lock()

    def send(self, line: str) -> None:
        if PRIVATE in line and _private_reply(line):
            return
        data = line.encode("utf-8", "replace")
        with self._lock:
            while data:
                data = data[os.write(self._fd, data):]


def _private_reply(line: str) -> bool:
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return (
        isinstance(message, dict)
        and "method" not in message
        and isinstance(message.get("id"), str)
        and message["id"].startswith(PRIVATE)
    )


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _valid_initialize(params: object) -> bool:
    """Params the SDK accepts as they are (else it is the SDK's to answer, error included)."""
    if not isinstance(params, dict):
        return False
    client = params.get("clientInfo")
    return (
        isinstance(params.get("protocolVersion"), str)
        and isinstance(params.get("capabilities"), dict)
        and isinstance(client, dict)
        and isinstance(client.get("name"), str)
        and isinstance(client.get("version"), str)
    )


class Front:
    """Answers what it can from ``listing`` until :meth:`hand_over`; queues every line."""

    def __init__(self, listing: Mapping[str, Any], wire: Wire, env: Mapping[str, str]) -> None:
        self._listing = listing
        self.wire = wire
        self._channels = channels_enabled(env)
        self._answered_initialize = False
        self._handed_over = False
        self._passed = 0
        self.lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        """What the SDK reads, in arrival order; None once stdin ended."""

    def hand_over(self) -> None:
        """From now on every line goes to the SDK."""
        self._handed_over = True

    def take(self, line: str) -> None:
        """One line from the client: answered here, queued for the SDK, or both."""
        if not self._handed_over:
            reply, line_or_none = self.answer(line)
            if reply is not None:
                self.wire.send(reply)
            if line_or_none is None:
                return
            line = line_or_none
        self.lines.put(line)

    def end(self) -> None:
        self.lines.put(None)

    def read_from(self, fd: int) -> None:
        """Take every line of ``fd`` (the thread's body), then mark the end."""
        try:
            with io.TextIOWrapper(os.fdopen(fd, "rb"), encoding="utf-8", errors="replace") as src:
                for line in src:
                    self.take(line)
        except (OSError, ValueError):
            pass
        finally:
            self.end()

    def answer(self, line: str) -> tuple[str | None, str | None]:
        """``(reply, line to pass on)`` for one line; ``(None, line)`` when it is not ours."""
        if '"initialize"' not in line and '"tools/list"' not in line:
            return None, line
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return None, line
        if (
            not isinstance(message, dict)
            or message.get("jsonrpc") != "2.0"
            or not _is_id(message.get("id"))
        ):
            return None, line
        method, params = message.get("method"), message.get("params")
        if method == "initialize" and not self._answered_initialize and _valid_initialize(params):
            assert isinstance(params, dict)
            self._answered_initialize = True
            reply = self._reply(message["id"], self.initialize_result(params["protocolVersion"]))
            self._passed += 1
            message["id"] = f"{PRIVATE}{self._passed}"
            end = "\n" if line.endswith("\n") else ""
            return reply, json.dumps(message) + end
        if method == "tools/list" and self._answered_initialize and params in (None, {}):
            return self._reply(message["id"], self._listing["tools"]), None
        return None, line

    def initialize_result(self, requested: str) -> dict[str, Any]:
        """The SDK's ``initialize`` result for a client asking for protocol ``requested``."""
        result = json.loads(json.dumps(self._listing["initialize"]))
        versions = self._listing["versions"]
        result["protocolVersion"] = requested if requested in versions else self._listing["latest"]
        if self._channels:
            result["capabilities"]["experimental"] = {CHANNEL_CAPABILITY: {}}
        return dict(result)

    @staticmethod
    def _reply(request_id: object, result: object) -> str:
        body = {"jsonrpc": "2.0", "id": request_id, "result": result}
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n"


class Started:
    """The front end serving, and how to give fds 0 and 1 back (:func:`start`)."""

    def __init__(self, front: Front, saved: tuple[int, int]) -> None:
        self.front = front
        self._saved = saved

    def stop(self) -> None:
        """Point fds 0 and 1 back where they were."""
        sys.stdout.flush()
        os.dup2(self._saved[0], 0)
        os.dup2(self._saved[1], 1)
        for fd in self._saved:
            os.close(fd)


def start(env: Mapping[str, str] = os.environ) -> Started:
    """Take the client's stdin and stdout and answer from :data:`LISTING` at once; the caller
    then imports the SDK and hands over (:func:`crosstalk.mcp_server.serve_behind`)."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    front = Front(load_listing(), Wire(wire_out), env)
    threading.Thread(target=front.read_from, args=(wire_in,), daemon=True).start()
    return Started(front, saved)
