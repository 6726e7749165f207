"""Read a model request, in any of the four APIs, as a ``Turn`` the script can match.

Request bodies come from real clients whose shapes drift between versions, so every reader here is
lenient: a field of an unexpected type counts as absent, and nothing raises on odd input.

The *latest turn* is everything after the last message the model wrote (an ``assistant`` or
``model`` message, or a Responses ``function_call`` item); see ``script.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tests.clients.script import Api, ToolName, ToolResult, Turn

JsonObject = dict[str, object]
_Predicate = Callable[[JsonObject], bool]


def read_turn(api: Api, body: object) -> Turn:
    """Parse one request body sent on ``api`` (a non-object body gives an empty turn)."""
    if not isinstance(body, dict):
        return Turn((), (), ())
    strings = tuple(strings_in(body))
    if api is Api.ANTHROPIC:
        return _anthropic(body, strings)
    if api is Api.CHAT:
        return _chat(body, strings)
    if api is Api.RESPONSES:
        return _responses(body, strings)
    return _gemini(body, strings)


def is_streaming(body: object) -> bool:
    """Whether a Messages, Responses or Chat body asks for a streamed answer."""
    return isinstance(body, dict) and body.get("stream") is True


def model_of(body: object, default: str = "standin-model") -> str:
    """The model the request names, or ``default``."""
    model = body.get("model") if isinstance(body, dict) else None
    return model if isinstance(model, str) else default


def offered_tools(api: Api, body: object) -> tuple[ToolName, ...]:
    """The tools a request offers the model, named as the model must call them.

    Anthropic lists ``tools[].name``, Chat ``tools[].function.name``, Gemini
    ``tools[].functionDeclarations[].name``; the Responses API lists functions by name and MCP
    servers as ``namespace`` tools holding their functions (platform-notes §5.2).
    """
    tools = _objects(body.get("tools")) if isinstance(body, dict) else []
    if api is Api.CHAT:
        tools = [f for t in tools if isinstance(f := t.get("function"), dict)]
    elif api is Api.GEMINI:
        tools = [d for t in tools for d in _objects(t.get("functionDeclarations"))]
    names: list[ToolName] = []
    for tool in tools:
        if api is Api.RESPONSES and tool.get("type") == "namespace":
            space = _str(tool.get("name"))
            names.extend(ToolName(name, space) for inner in _objects(tool.get("tools"))
                         if (name := _str(inner.get("name"))) is not None)
        elif (name := _str(tool.get("name"))) is not None:
            names.append(ToolName(name))
    return tuple(names)


def _anthropic(body: JsonObject, strings: tuple[str, ...]) -> Turn:
    texts: list[str] = []
    results: list[ToolResult] = []
    for message in _tail(_objects(body.get("messages")), _is_role("assistant")):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        texts.extend(_texts(content, ("text",)))
        for block in _objects(content):
            if block.get("type") == "tool_result":
                results.append(ToolResult(_str(block.get("tool_use_id")), None,
                                          block.get("content")))
    return Turn(tuple(texts), tuple(results), strings)


def _chat(body: JsonObject, strings: tuple[str, ...]) -> Turn:
    texts: list[str] = []
    results: list[ToolResult] = []
    for message in _tail(_objects(body.get("messages")), _is_role("assistant")):
        if message.get("role") == "user":
            texts.extend(_texts(message.get("content"), ("text",)))
        elif message.get("role") == "tool":
            results.append(ToolResult(_str(message.get("tool_call_id")),
                                      _str(message.get("name")), message.get("content")))
    return Turn(tuple(texts), tuple(results), strings)


def _responses(body: JsonObject, strings: tuple[str, ...]) -> Turn:
    raw = body.get("input")
    if isinstance(raw, str):
        return Turn((raw,), (), strings)
    texts: list[str] = []
    results: list[ToolResult] = []
    for item in _tail(_objects(raw), _is_model_item):
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            texts.extend(_texts(item.get("content"), ("input_text", "text")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            results.append(ToolResult(_str(item.get("call_id")), None, item.get("output")))
    return Turn(tuple(texts), tuple(results), strings)


def _gemini(body: JsonObject, strings: tuple[str, ...]) -> Turn:
    texts: list[str] = []
    results: list[ToolResult] = []
    for content in _tail(_objects(body.get("contents")), _is_role("model")):
        for part in _objects(content.get("parts")):
            response = part.get("functionResponse")
            if isinstance(response, dict):
                results.append(ToolResult(_str(response.get("id")), _str(response.get("name")),
                                          response.get("response")))
            elif content.get("role") == "user" and isinstance(part.get("text"), str):
                texts.append(str(part["text"]))
    return Turn(tuple(texts), tuple(results), strings, _asks_for_json(body))


def _asks_for_json(body: JsonObject) -> bool:
    """A Gemini request for structured JSON output: a side call, such as Gemini CLI's router.

    The router (platform-notes §5.4) is not part of the conversation; a wrong answer only makes the
    client fall back, so it gets the default reply and never uses up a scripted step.
    """
    config = body.get("generationConfig")
    if not isinstance(config, dict):
        return False
    return (config.get("responseMimeType") == "application/json"
            or "responseSchema" in config or "responseJsonSchema" in config)


def _is_role(role: str) -> _Predicate:
    def check(message: JsonObject) -> bool:
        return message.get("role") == role
    return check


def _is_model_item(item: JsonObject) -> bool:
    kind = item.get("type", "message")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in ("function_call", "custom_tool_call", "reasoning")


def _tail(items: list[JsonObject], by_model: _Predicate) -> list[JsonObject]:
    """The items after the last one the model wrote."""
    last = max((i for i, item in enumerate(items) if by_model(item)), default=-1)
    return items[last + 1:]


def _texts(content: object, kinds: tuple[str, ...]) -> list[str]:
    """Texts of a message: a plain string, or the text parts among its content blocks."""
    if isinstance(content, str):
        return [content]
    return [str(part["text"]) for part in _objects(content)
            if part.get("type") in kinds and isinstance(part.get("text"), str)]


def _objects(value: object) -> list[JsonObject]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, dict)]


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def strings_in(value: object) -> Iterator[str]:
    """Every string value anywhere in a JSON document (not keys)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
