"""The stand-in's script: ordered steps, each a condition on a model request and a reply.

A script file is JSON::

    {"steps": [
      {"when": {"tool_result_for": "call_send_1"},
       "reply": {"text": "sent", "echo_tool_result": true}},
      {"when": {"user_text_contains": "send a hello"},
       "reply": {"tool": "crosstalk_send", "server": "crosstalk", "call_id": "call_send_1",
                 "arguments": {"text": "hello"}}, "times": 1},
      {"when": "otherwise", "reply": {"text": "nothing scripted"}}
    ]}

Steps are tried in order; the first whose conditions all hold answers, and a step with ``times``
answers at most that many requests. When none holds the reply is ``STANDIN-REPLY-OK``.

Conditions look at the *latest turn*: what the client appended since the model last spoke (every
message after the last assistant/model message). That is where a fresh prompt or a tool result
sits; older history never re-triggers a step. ``request_contains`` alone looks at every string in
the whole request, which is where hook context lands (a ``system`` or ``developer`` message).

A tool reply names the tool either literally (``tool``, plus ``namespace`` for the Responses API)
or as an MCP tool (``tool`` + ``server``), which is spelled per API as each client spells it; see
``mcp_tool_name``. This module is pure: the server holds the use counts and passes them in.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from pathlib import Path

import attrs

DEFAULT_TEXT = "STANDIN-REPLY-OK"
_CALL_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Api(enum.Enum):
    """The model APIs the stand-in speaks."""

    ANTHROPIC = "anthropic"
    RESPONSES = "responses"
    CHAT = "chat"
    GEMINI = "gemini"


# Which API each client we test talks to the stand-in (platform-notes §5).
CLIENT_API: Mapping[str, Api] = {
    "claude": Api.ANTHROPIC,
    "codex": Api.RESPONSES,
    "qwen": Api.CHAT,
    "gemini": Api.GEMINI,
}


@attrs.frozen
class ToolName:
    """A tool's name as the model must emit it; ``namespace`` is used by the Responses API only."""

    name: str
    namespace: str | None = None


def mcp_tool_name(api: Api, server: str, tool: str) -> ToolName:
    """Spell MCP tool ``tool`` of server ``server`` the way the client on ``api`` expects it.

    Measured in platform-notes §5.5: Claude Code and Qwen Code use ``mcp__srv__tool``; Codex sends
    a namespace tool ``mcp__srv`` holding ``tool``; Gemini CLI uses ``mcp_srv_tool``.

    Args:
        api: the API the client speaks.
        server: the MCP server's name in the client's config, e.g. ``crosstalk``.
        tool: the tool's own name, e.g. ``crosstalk_send``.

    Returns:
        The name (and for the Responses API the namespace) to put in a tool call.
    """
    if api is Api.RESPONSES:
        return ToolName(tool, f"mcp__{server}")
    if api is Api.GEMINI:
        return ToolName(f"mcp_{server}_{tool}")
    return ToolName(f"mcp__{server}__{tool}")


@attrs.frozen
class ToolResult:
    """A tool result the client sent back: the call it answers and its content as sent."""

    call_id: str | None
    name: str | None
    content: object = attrs.field(eq=False, hash=False)


@attrs.frozen
class Turn:
    """What the script may look at in one request, whatever the API."""

    user_texts: tuple[str, ...]
    tool_results: tuple[ToolResult, ...]
    strings: tuple[str, ...]
    side_request: bool = False


@attrs.frozen
class TextReply:
    """Answer with text; ``echo_tool_result`` appends `` tool_result=<JSON>`` (first result)."""

    text: str
    echo_tool_result: bool = False


@attrs.frozen
class ToolReply:
    """Answer with one tool call."""

    tool: str
    arguments: Mapping[str, object] = attrs.field(eq=False, hash=False)
    call_id: str
    server: str | None = None
    namespace: str | None = None

    def name_for(self, api: Api) -> ToolName:
        """The tool's name as the client on ``api`` expects it."""
        if self.server is not None:
            return mcp_tool_name(api, self.server, self.tool)
        return ToolName(self.tool, self.namespace if api is Api.RESPONSES else None)


Reply = TextReply | ToolReply


@attrs.frozen
class Condition:
    """All the given tests must hold; an empty condition always holds ("otherwise")."""

    tool_result_for: str | None = None
    user_text_contains: str | None = None
    request_contains: str | None = None


@attrs.frozen
class Step:
    """One scripted answer and when to give it."""

    when: Condition
    reply: Reply
    times: int | None = None


@attrs.frozen
class Answer:
    """What to send back: text, or a tool call spelled for the request's API."""

    step: int | None
    text: str | None = None
    call: ToolName | None = None
    call_id: str | None = None
    arguments: Mapping[str, object] = attrs.field(factory=dict, eq=False, hash=False)


@attrs.frozen
class Script:
    """The ordered steps. Load with ``Script.load`` or ``Script.from_json``."""

    steps: tuple[Step, ...] = ()

    @classmethod
    def load(cls, path: Path) -> Script:
        """Read and check a script file."""
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    @classmethod
    def from_json(cls, data: object) -> Script:
        """Check a parsed script; raises ``ValueError`` naming the first bad field."""
        if not isinstance(data, dict) or not isinstance(data.get("steps", []), list):
            raise ValueError('a script is an object {"steps": [...]}')
        unknown = set(data) - {"steps"}
        if unknown:
            raise ValueError(f"unknown script keys: {sorted(unknown)}")
        steps = tuple(_parse_step(i, raw) for i, raw in enumerate(data.get("steps", [])))
        return cls(steps)

    def choose(self, api: Api, turn: Turn, used: Mapping[int, int]) -> Answer:
        """Pick the answer to one request.

        Args:
            api: the API the request came in on (tool names are spelled for it).
            turn: the request, as parsed for its API.
            used: how many requests each step index has answered so far.

        Returns:
            The first matching step's answer, or the default text (``step`` None).
        """
        if not turn.side_request:
            for index, step in enumerate(self.steps):
                if step.times is not None and used.get(index, 0) >= step.times:
                    continue
                if self._holds(step.when, api, turn):
                    return _answer(index, step.reply, api, turn)
        return Answer(None, text=DEFAULT_TEXT)

    def _holds(self, when: Condition, api: Api, turn: Turn) -> bool:
        if when.user_text_contains is not None and not any(
            when.user_text_contains in text for text in turn.user_texts
        ):
            return False
        if when.request_contains is not None and not any(
            when.request_contains in text for text in turn.strings
        ):
            return False
        if when.tool_result_for is not None:
            return any(self._answers(result, when.tool_result_for, api)
                       for result in turn.tool_results)
        return True

    def _answers(self, result: ToolResult, call_id: str, api: Api) -> bool:
        """Whether ``result`` answers our call ``call_id``.

        Matched on the call id; failing that on the tool's name, for a client that might put its
        own id on a call (Gemini's functionResponse carries the function's name).
        """
        if result.call_id == call_id:
            return True
        if result.name is None:
            return False
        return any(isinstance(s.reply, ToolReply) and s.reply.call_id == call_id
                   and s.reply.name_for(api).name == result.name for s in self.steps)


def _answer(index: int, reply: Reply, api: Api, turn: Turn) -> Answer:
    if isinstance(reply, ToolReply):
        return Answer(index, call=reply.name_for(api), call_id=reply.call_id,
                      arguments=reply.arguments)
    text = reply.text
    if reply.echo_tool_result and turn.tool_results:
        text += " tool_result=" + json.dumps(turn.tool_results[0].content, ensure_ascii=False)
    return Answer(index, text=text)


def _parse_step(index: int, raw: object) -> Step:
    where = f"steps[{index}]"
    if not isinstance(raw, dict):
        raise ValueError(f"{where} is not an object")
    _only(where, raw, {"when", "reply", "times"})
    times = raw.get("times")
    if times is not None and (not isinstance(times, int) or isinstance(times, bool) or times < 1):
        raise ValueError(f"{where}.times must be a positive integer")
    return Step(_parse_when(where, raw.get("when", "otherwise")),
                _parse_reply(where, raw.get("reply"), f"call_standin_{index}"), times)


def _parse_when(where: str, raw: object) -> Condition:
    if raw == "otherwise":
        return Condition()
    if not isinstance(raw, dict):
        raise ValueError(f'{where}.when is an object or "otherwise"')
    keys = {"tool_result_for", "user_text_contains", "request_contains"}
    _only(f"{where}.when", raw, keys)
    return Condition(**{key: _opt_str(f"{where}.when.{key}", raw.get(key)) for key in keys})


def _parse_reply(where: str, raw: object, default_call_id: str) -> Reply:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}.reply is not an object")
    if "text" in raw:
        _only(f"{where}.reply", raw, {"text", "echo_tool_result"})
        text = _opt_str(f"{where}.reply.text", raw["text"])
        echo = raw.get("echo_tool_result", False)
        if text is None or not isinstance(echo, bool):
            raise ValueError(f"{where}.reply needs a string text and a boolean echo_tool_result")
        return TextReply(text, echo)
    _only(f"{where}.reply", raw, {"tool", "server", "namespace", "call_id", "arguments"})
    tool = _opt_str(f"{where}.reply.tool", raw.get("tool"))
    call_id = _opt_str(f"{where}.reply.call_id", raw.get("call_id", default_call_id))
    arguments = raw.get("arguments", {})
    if tool is None or call_id is None or not _CALL_ID.match(call_id):
        raise ValueError(f"{where}.reply needs text, or a tool and a call_id of [A-Za-z0-9_-]")
    if not isinstance(arguments, dict):
        raise ValueError(f"{where}.reply.arguments must be an object")
    return ToolReply(tool, arguments, call_id, _opt_str(f"{where}.reply.server", raw.get("server")),
                     _opt_str(f"{where}.reply.namespace", raw.get("namespace")))


def _only(where: str, raw: Mapping[str, object], allowed: set[str]) -> None:
    unknown = set(raw) - allowed
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}")


def _opt_str(where: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where} must be a string")
