"""What the MCP server lists, written down: ``crosstalk/mcp/front.json`` (the SDK's own
``initialize``, ``tools/list`` and ``server/discover`` answers, which the stdlib front end replays
while the SDK imports) and ``docs/tools.md``. Both come from running the real server with no
daemon behind it; ``tests/mcp/test_front.py`` and ``tests/mcp/test_tools_doc.py`` fail when either
file is stale.

``python -m crosstalk.mcp.listing --write-docs docs/tools.md | --write-front`` rewrites them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import trio
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)

from crosstalk.mcp.front import CAPABILITIES_KEY, LISTING, VERSION_KEY
from crosstalk.mcp.profiles import CORE
from crosstalk.mcp.server import INSTRUCTIONS, build_server, run_stdio


class _Collected:
    """A sink that keeps what the SDK wrote; ``full`` is set at ``expect`` lines."""

    def __init__(self, expect: int) -> None:
        self.lines: list[str] = []
        self.expect = expect
        self.full = trio.Event()

    async def write(self, text: str) -> None:
        self.lines.append(text)
        if len(self.lines) >= self.expect:
            self.full.set()

    async def flush(self) -> None:
        pass


class _Given:
    """``lines``, then stdin stays open until ``sink`` is full."""

    def __init__(self, lines: list[str], sink: _Collected) -> None:
        self._lines, self._sink = lines, sink

    async def __aiter__(self) -> AsyncIterator[str]:
        for line in self._lines:
            yield line
        with trio.fail_after(30):
            await self._sink.full.wait()


async def sdk_answers(
    lines: list[str], env: Mapping[str, str], expect: int, tools: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """What the SDK server (no daemon behind it, serving ``tools``, default all) writes back for
    ``lines`` (``expect`` answers), parsed."""
    sink = _Collected(expect)
    source = _Given(lines, sink)
    server = build_server(_NoDaemon(), tools)
    await run_stdio(server, None, source=source, sink=sink, env=env)
    return [json.loads(line) for line in sink.lines]


def _request(request_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def handshake(version: str) -> list[str]:
    """``initialize`` for ``version``, ``initialized`` and ``tools/list``, as a client sends."""
    hello = {"protocolVersion": version, "capabilities": {},
             "clientInfo": {"name": "crosstalk-front", "version": "0"}}
    initialized = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    return [
        _request(1, "initialize", hello) + "\n", initialized + "\n",
        _request(2, "tools/list", {}) + "\n",
    ]


def discover_probe(version: str, request_id: int | str = 1) -> str:
    """``server/discover`` with the full modern envelope at ``version``, as a client opens a
    modern connection (Claude Code 2.1.332 sends this first)."""
    meta = {VERSION_KEY: version, CAPABILITIES_KEY: {},
            "io.modelcontextprotocol/clientInfo": {"name": "crosstalk-front", "version": "0"}}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "server/discover",
            "params": {"_meta": meta}}
    return json.dumps(body) + "\n"


async def front_listing() -> dict[str, Any]:
    """``crosstalk/mcp/front.json``: the SDK's own ``initialize`` and ``tools/list`` results, and
    its ``server/discover`` result at each modern version (one connection each: the first request
    decides a connection's era)."""
    latest = LATEST_HANDSHAKE_VERSION
    init, tools = await sdk_answers(handshake(latest), {}, 2)
    result = dict(init["result"])
    result.pop("protocolVersion")
    discover = {}
    for version in MODERN_PROTOCOL_VERSIONS:
        (answer,) = await sdk_answers([discover_probe(version)], {}, 1)
        discover[version] = answer["result"]
    return {
        "versions": list(HANDSHAKE_PROTOCOL_VERSIONS),
        "latest": latest,
        "initialize": result,
        "tools": tools["result"],
        "modern": list(MODERN_PROTOCOL_VERSIONS),
        "discover": discover,
    }


def render_listing(listing: Mapping[str, Any]) -> str:
    return json.dumps(listing, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


# --- docs/tools.md --------------------------------------------------------------------------------

DOC_HEADER = """\
# MCP tools

Generated from the MCP server's own tool list by
`python -m crosstalk.mcp.listing --write-docs docs/tools.md`; `tests/mcp/test_tools_doc.py` fails
when this file is stale. Every tool is one request to the daemon; results are JSON text, and
failures are `isError` results reading `crosstalk error [<code>]: <sentence>` (codes: CLI.md);
wrong arguments (a missing, unknown or mistyped one) are `usage` errors naming the argument.

`crosstalk server --tools PROFILE` serves a subset: `full` (the default) is every tool below,
`core` is CORE_TOOLS, and tool names add to a profile or stand alone
(`--tools core,crosstalk_ask`). `crosstalk install CLIENT --tools …` writes the
flag into the client's configuration.

Server instructions:

"""


def _schema_type(prop: Mapping[str, Any]) -> str:
    if "anyOf" in prop:
        return " or ".join(_schema_type(p) for p in prop["anyOf"])
    if "enum" in prop:
        return ", ".join(f"`{v}`" for v in prop["enum"])
    if prop.get("type") == "array":
        return f"list of {_schema_type(prop.get('items', {}))}"
    return str(prop.get("type", "any"))


def render_tools_doc(tools: list[Any]) -> str:
    """``docs/tools.md`` for ``tools`` (the SDK's ``Tool`` objects, in server order)."""
    quoted = "\n".join(f"> {line}" if line else ">" for line in INSTRUCTIONS.splitlines())
    core = ", ".join(f"`{name}`" for name in CORE)
    parts = [DOC_HEADER.replace("CORE_TOOLS", core) + quoted + "\n"]
    for tool in tools:
        schema = tool.input_schema
        required = set(schema.get("required", []))
        lines = [f"## `{tool.name}`", "", tool.description or "", ""]
        props: Mapping[str, Any] = schema.get("properties", {})
        if props:
            lines += ["| argument | type | required | default | meaning |", "|---|---|---|---|---|"]
            for name, prop in props.items():
                default = "" if name in required else f"`{json.dumps(prop.get('default'))}`"
                lines.append(
                    f"| `{name}` | {_schema_type(prop)} | {'yes' if name in required else 'no'} "
                    f"| {default} | {prop.get('description', '')} |"
                )
        else:
            lines.append("No arguments.")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


class _NoDaemon:
    """A caller for listing tools only: calling one is a bug."""

    session: str | None = None
    cwd = "."
    transcript: str | None = None

    async def call(self, op: str, params: dict[str, Any], *, limit: float = 0.0) -> Any:
        raise AssertionError("listing tools never calls the daemon")

    async def call_until(self, op: str, params: dict[str, Any], key: str, *, limit: float) -> Any:
        raise AssertionError("listing tools never calls the daemon")


async def tools_doc() -> str:
    """The text ``docs/tools.md`` must hold, from the server's own ``tools/list``."""
    return render_tools_doc(list(await build_server(_NoDaemon()).list_tools()))


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--write-docs":
        with open(sys.argv[2], "w", encoding="utf-8") as out:
            out.write(trio.run(tools_doc))
    elif len(sys.argv) == 2 and sys.argv[1] == "--write-front":
        text = render_listing(trio.run(front_listing))
        with open(LISTING, "w", encoding="utf-8") as out:
            out.write(text)
    else:
        sys.exit(
            "usage: python -m crosstalk.mcp.listing --write-docs docs/tools.md | --write-front"
        )
