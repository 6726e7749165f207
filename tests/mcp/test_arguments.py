"""Wrong tool arguments come back as crosstalk ``usage`` errors naming the field, never reach the
daemon, and ``serverInfo.version`` is the package version on every path that answers it."""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

import crosstalk
from crosstalk.mcp.front import Front, Wire, load_listing
from crosstalk.mcp.listing import discover_probe, handshake, sdk_answers
from crosstalk.mcp.server import build_server, package_version

USAGE = re.compile(r"crosstalk error \[usage\]: [^\n]+\.")
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


class RecordingCaller:
    """A daemon that answers every request with ``{}`` and remembers it was asked."""

    session: str | None = "s1"
    cwd = "/tmp"
    transcript: str | None = None

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, op: str, params: dict[str, Any], *, limit: float = 0.0) -> Any:
        self.calls.append(op)
        return {}

    async def call_until(self, op: str, params: dict[str, Any], key: str, *, limit: float) -> Any:
        self.calls.append(op)
        return {key: "x"}


def _text(result: Any) -> str:
    assert isinstance(result, CallToolResult) and result.is_error
    (item,) = result.content
    assert item.type == "text"
    return item.text


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("crosstalk_send", {"to": 1, "text": "x"}, "'to'"),
        ("crosstalk_send", {"to": "ben"}, "'text'"),
        ("crosstalk_send", {"to": "ben", "text": "x", "intent": "urgent"}, "'intent'"),
        ("crosstalk_reserve", {"paths": "src/**"}, "'paths'"),
        ("crosstalk_ask", {"to": "ben", "text": "q", "timeout_seconds": 0}, "'timeout_seconds'"),
        ("crosstalk_read_slice", {"message_id": "m1", "index": -1}, "'index'"),
        ("crosstalk_read", {"unread": True}, "'unread'"),
        ("crosstalk_rooms", {"room": "x"}, "'room'"),
        ("crosstalk_teleport", {}, "'crosstalk_teleport'"),
    ],
)
async def test_wrong_arguments_are_usage_errors_naming_the_field(
    tool: str, arguments: dict[str, Any], field: str
) -> None:
    """Over the MCP client: one sentence, the field named, no pydantic text or link, and the
    daemon never asked."""
    daemon = RecordingCaller()
    async with Client(build_server(daemon), mode="legacy") as client:
        text = _text(await client.call_tool(tool, arguments))
    assert USAGE.fullmatch(text), text
    assert field in text
    assert "pydantic" not in text and "http" not in text and "validation error" not in text
    assert daemon.calls == []


async def test_right_arguments_still_reach_the_daemon() -> None:
    """The checks refuse only what is wrong: a valid call is the daemon's."""
    daemon = RecordingCaller()
    async with Client(build_server(daemon), mode="legacy") as client:
        result = await client.call_tool("crosstalk_send", {"to": "ben", "text": "hi"})
    assert not result.is_error and daemon.calls == ["send"]


_VALID: dict[str, Any] = {"string": "x", "array": ["x"], "integer": 1, "number": 1,
                          "boolean": True}


def _valid(prop: dict[str, Any]) -> Any:
    kinds = [p.get("type") for p in prop.get("anyOf", [prop])]
    return _VALID[next(k for k in kinds if k in _VALID)]


@st.composite
def wrong_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any], str]:
    """A tool, arguments wrong in exactly one way, and the name the error must quote."""
    tool = draw(st.sampled_from(load_listing()["tools"]["tools"]))
    props: dict[str, Any] = tool["inputSchema"].get("properties", {})
    required: list[str] = tool["inputSchema"].get("required", [])
    arguments = {name: _valid(props[name]) for name in required}
    kinds = ["unknown"] + (["missing"] if required else []) + (["shape"] if props else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "missing":
        field = draw(st.sampled_from(required))
        del arguments[field]
    elif kind == "shape":
        field = draw(st.sampled_from(sorted(props)))
        wrong: list[st.SearchStrategy[Any]] = [
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)
        ]
        if _valid(props[field]) != ["x"]:  # a list is right for an array
            wrong.append(st.lists(st.integers(), max_size=2))
        arguments[field] = draw(st.one_of(wrong))
    else:
        field = draw(st.text(min_size=1, max_size=8).filter(lambda k: k not in props))
        arguments[field] = draw(st.none() | st.integers() | st.text(max_size=4))
    return tool["name"], arguments, repr(field)


@pytest.fixture(scope="module")
def server() -> tuple[MCPServer, RecordingCaller]:
    daemon = RecordingCaller()
    return build_server(daemon), daemon


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(call=wrong_calls())
def test_any_wrong_argument_shape_is_a_usage_error_naming_it(
    call: tuple[str, dict[str, Any], str], server: tuple[MCPServer, RecordingCaller]
) -> None:
    """A missing required argument, an unknown one, or a value of the wrong JSON shape, for
    every tool: the usage sentence quotes that argument and the daemon is never asked."""
    tool, arguments, field = call
    mcp_server, daemon = server
    text = _text(trio.run(mcp_server.call_tool, tool, arguments))
    assert USAGE.fullmatch(text), text
    assert field in text, (text, field)
    assert daemon.calls == []


def _installed_version() -> str:
    try:
        return version("crosstalk")
    except PackageNotFoundError:
        return crosstalk.__version__


async def test_server_info_version_is_the_package_version_everywhere() -> None:
    """The SDK's initialize and server/discover, the committed listing and the front end's
    answers all carry the package's version."""
    expected = _installed_version()
    assert expected and package_version() == expected
    listing = load_listing()
    init, _ = await sdk_answers(handshake(listing["latest"]), {}, 2)
    assert init["result"]["serverInfo"]["version"] == expected
    front = Front(listing, Wire(-1), {})
    assert front.initialize_result(listing["latest"])["serverInfo"]["version"] == expected
    for modern in listing["modern"]:
        (discovered,) = await sdk_answers([discover_probe(modern)], {}, 1)
        assert discovered["result"]["_meta"][SERVER_INFO]["version"] == expected
        assert front.discover_result(modern)["_meta"][SERVER_INFO]["version"] == expected
