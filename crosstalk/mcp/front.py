"""``crosstalk server``'s front end: the opening requests answered at once (stdlib).

Importing the MCP SDK (pydantic, starlette, anyio, the generated types) takes most of a second on
a quiet machine and several on a loaded one, and a client waits for its opening request's answer
before it lists tools or starts the agent's turn. So the process starts here: it takes the
client's stdin and stdout, starts one thread that reads stdin, and only then imports the SDK
(:mod:`crosstalk.mcp.server`) on the main thread. Until the SDK serves, the reader answers what it
can from :data:`LISTING` (``crosstalk/mcp/front.json``, written from the SDK's own answers by
``python -m crosstalk.mcp.listing --write-front``; ``tests/mcp/test_front.py`` fails if the file
and the SDK ever disagree, for every protocol version and both channel settings).

Eras. The SDK serves a connection in one of two protocol eras, decided once by the client's first
request (``mcp.server.runner.serve_dual_era_loop``): *modern* (2026-07-28: no handshake, every
request carries its envelope in ``params._meta``) when that request is not ``initialize`` and its
``params._meta`` holds :data:`VERSION_KEY`; *legacy* (the ``initialize`` handshake) otherwise.
The front end decides the era by the same rule from the same line (:class:`Era`), so the two can
never disagree; lines before the first request (notifications, replies) decide nothing. A line it
cannot read exactly as the SDK will (it does not parse, holds NaN, or is nested deeper than
:data:`DEEPEST`, which ``server.repair_line`` rewrites) leaves the era to the SDK alone, and
the front end answers nothing more. It answers only the connection's first request, and what the
SDK would answer identically after it:

- legacy, opened by a valid ``initialize``: answered, then passed on to the SDK under a private id
  (:data:`PRIVATE`), so the SDK's session is initialized and its era decided like any other; its
  own answer to that id is dropped on the way out (:class:`Wire`). A ``tools/list`` (no cursor)
  after it is answered too, and not passed on;
- modern, opened by ``server/discover`` with the full envelope at a version the SDK serves:
  answered, then passed on under a private id the same way. Nothing else on a modern connection
  (an ``initialize`` there is the SDK's to refuse).

Every other line is queued in arrival order and handed to the SDK when it is ready: nothing is
lost and the SDK sees the stream in order. After the hand-over every line goes to the SDK. Both
writers share one lock and write whole lines.

Like the SDK's own stdio transport, fds 0 and 1 point at the null device and stderr while
serving, so stray prints and children never touch the wire.
"""

from __future__ import annotations

import enum
import io
import json
import os
import queue
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from crosstalk.mcp.profiles import FULL, select

LISTING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "front.json")
"""The SDK's answers, committed: ``versions``, ``latest``, ``initialize``, ``tools``, ``modern``
and ``discover`` (by modern version)."""
PRIVATE = "crosstalk-front-"
"""Prefix of the ids under which requests answered here are passed on to the SDK."""
CHANNELS_ENV = "CROSSTALK_CHANNELS"
CHANNEL_CAPABILITY = "claude/channel"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
"""The modern envelope's required keys in ``params._meta`` (``mcp.shared.inbound``)."""
DEEPEST = 32
"""Nesting beyond which ``server.repair_line`` rewrites a line (its ``MAX_DEPTH``)."""


class Era(enum.Enum):
    """What the connection is, as the SDK will decide it from the first request."""

    UNDECIDED = "undecided"  # no request yet
    LEGACY = "legacy"  # the first request was ``initialize``, or carried no envelope
    MODERN = "modern"  # the first request was not ``initialize`` and carried the version key
    UNREAD = "unread"  # a line came first that the SDK may read otherwise: all is the SDK's


class Unreadable(Exception):
    """A line the SDK may read otherwise than :func:`read_request` would."""


def channels_enabled(env: Mapping[str, str]) -> bool:
    """Whether the person turned channel pushes on (:mod:`crosstalk.mcp.channel`)."""
    return env.get(CHANNELS_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def load_listing(path: str = LISTING) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        listing: dict[str, Any] = json.load(f)
    return listing


def listed_names(listing: Mapping[str, Any]) -> list[str]:
    """Every tool's name, in the server's order (what ``full`` serves)."""
    return [tool["name"] for tool in listing["tools"]["tools"]]


def tools_result(listing: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """The SDK's ``tools/list`` result when it serves only ``names``: each tool's entry does not
    depend on the others, so a profile's answer is the full one filtered."""
    served = set(names)
    tools = [tool for tool in listing["tools"]["tools"] if tool["name"] in served]
    return {**listing["tools"], "tools": tools}


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


def _refuse_constant(name: str) -> object:
    raise Unreadable(name)  # NaN and Infinity: Python reads them, the SDK's parser does not


def _deeper_than(value: object, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` levels (as
    ``server.repair_line`` counts them: the outermost is level 1)."""
    if not isinstance(value, dict | list):
        return False
    if limit <= 0:
        return True
    children = value.values() if isinstance(value, dict) else value
    return any(_deeper_than(child, limit - 1) for child in children)


def read_request(line: str) -> dict[str, Any] | None:
    """The JSON-RPC request ``line`` holds as the SDK reads it (``jsonrpc`` "2.0", a string
    ``method``, a string or integer ``id``, ``params`` an object or absent), or None when it
    holds none (a notification, a reply, a batch, a malformed request).

    Raises:
        Unreadable: the SDK may read the line otherwise.
    """
    try:
        message = json.loads(line, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        raise Unreadable(line[:80]) from None
    if line.count("[") + line.count("{") > DEEPEST and _deeper_than(message, DEEPEST):
        raise Unreadable(line[:80])
    if (
        not isinstance(message, dict)
        or message.get("jsonrpc") != "2.0"
        or not isinstance(message.get("method"), str)
        or not _is_id(message.get("id"))
        or not isinstance(message.get("params", {}), dict | None)
    ):
        return None
    return message


def _envelope(params: object) -> Mapping[str, Any] | None:
    """``params._meta`` when it carries the version key (the SDK's ``_has_modern_envelope``)."""
    if not isinstance(params, dict):
        return None
    meta = params.get("_meta")
    return meta if isinstance(meta, dict) and VERSION_KEY in meta else None


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
    """Answers what it can from ``listing`` until :meth:`hand_over`; queues every line.

    ``tools`` are the names the server serves (its profile, :mod:`crosstalk.mcp.profiles`);
    None serves every listed tool.
    """

    def __init__(
        self,
        listing: Mapping[str, Any],
        wire: Wire,
        env: Mapping[str, str],
        tools: Sequence[str] | None = None,
    ) -> None:
        self._listing = listing
        self.tools = tuple(listed_names(listing) if tools is None else tools)
        self._tools_result = tools_result(listing, self.tools)
        self.wire = wire
        self._channels = channels_enabled(env)
        self.era = Era.UNDECIDED
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
        if self.era is Era.UNDECIDED:
            return self._opening(line)
        if self._answered_initialize and '"tools/list"' in line:
            return self._tools_list(line)
        return None, line

    def _opening(self, line: str) -> tuple[str | None, str | None]:
        """Until the first request: decide the era from it as the SDK will, answer it if ours."""
        try:
            message = read_request(line)
        except Unreadable:
            self.era = Era.UNREAD
            return None, line
        if message is None:
            return None, line
        method, params = message["method"], message.get("params") or {}
        envelope = _envelope(params)
        if method != "initialize" and envelope is not None:
            self.era = Era.MODERN
            version = envelope[VERSION_KEY]
            if (
                method == "server/discover"
                and version in self._listing["modern"]
                and isinstance(envelope.get(CAPABILITIES_KEY), dict)
                and set(params) == {"_meta"}
            ):
                return self._pass_on(message, line, self.discover_result(version))
            return None, line
        self.era = Era.LEGACY
        if method == "initialize" and _valid_initialize(params):
            self._answered_initialize = True
            return self._pass_on(message, line, self.initialize_result(params["protocolVersion"]))
        return None, line

    def _pass_on(
        self, message: dict[str, Any], line: str, result: dict[str, Any]
    ) -> tuple[str, str]:
        """Our answer to ``message``, and ``message`` under a private id for the SDK."""
        reply = self._reply(message["id"], result)
        self._passed += 1
        message["id"] = f"{PRIVATE}{self._passed}"
        end = "\n" if line.endswith("\n") else ""
        return reply, json.dumps(message) + end

    def _tools_list(self, line: str) -> tuple[str | None, str | None]:
        try:
            message = read_request(line)
        except Unreadable:
            return None, line
        if message is None or message["method"] != "tools/list":
            return None, line
        if message.get("params") in (None, {}):
            return self._reply(message["id"], self._tools_result), None
        return None, line

    def initialize_result(self, requested: str) -> dict[str, Any]:
        """The SDK's ``initialize`` result for a client asking for protocol ``requested``."""
        result = json.loads(json.dumps(self._listing["initialize"]))
        versions = self._listing["versions"]
        result["protocolVersion"] = requested if requested in versions else self._listing["latest"]
        if self._channels:
            result["capabilities"]["experimental"] = {CHANNEL_CAPABILITY: {}}
        return dict(result)

    def discover_result(self, version: str) -> dict[str, Any]:
        """The SDK's ``server/discover`` result at modern protocol ``version``: the same with
        channel pushes on or off (the SDK lists experimental capabilities at ``initialize``)."""
        return dict(json.loads(json.dumps(self._listing["discover"][version])))

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


def start(env: Mapping[str, str] = os.environ, tools: str = FULL) -> Started:
    """Take the client's stdin and stdout and answer from :data:`LISTING` at once, serving the
    tool profile ``tools``; the caller then imports the SDK and hands over
    (:func:`crosstalk.mcp.server.serve_behind`, which serves ``front.tools``).

    Raises:
        UsageError: ``tools`` names an unknown profile or tool (before any fd is touched).
    """
    listing = load_listing()
    names = select(tools, listed_names(listing))
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    front = Front(listing, Wire(wire_out), env, names)
    threading.Thread(target=front.read_from, args=(wire_in,), daemon=True).start()
    return Started(front, saved)
