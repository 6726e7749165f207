"""10 MB through the real stdio MCP server's ``crosstalk_send`` answers ``too_large`` (issue 19
item 5): the MCP SDK's own client drives ``crosstalk server`` against real daemons."""

from __future__ import annotations

from pathlib import Path

import trio
from mcp import Client

from tests.e2e.conftest import Person, pair, people, relay_url, short_tmp, stop_pid
from tests.mcp.test_server import error_text, git_project, parsed, server_params

__all__ = ["people", "relay_url", "short_tmp"]  # fixtures used by name below


async def test_ten_megabytes_through_crosstalk_send_is_too_large_and_nothing_is_sent(
    people: list[Person], short_tmp: Path
) -> None:
    """The tool result is an error with code too_large; the server keeps answering; nothing
    was queued (ana's `sent` is empty) and ben holds nothing."""
    ana, ben = people[0], people[1]
    await trio.to_thread.run_sync(lambda: pair(ana, ben))
    project = git_project(short_tmp / "proj")
    try:
        with trio.fail_after(120):
            async with Client(server_params(ana, project), mode="legacy") as c:
                huge = "x" * (10 * 1024 * 1024)
                result = await c.call_tool("crosstalk_send", {"to": "ben", "text": huge})
                assert error_text(result).startswith("crosstalk error [too_large]:")
                peers = parsed(await c.call_tool("crosstalk_peers", {}))
                assert [p["label"] for p in peers["peers"]] == ["ben"]
        assert (await trio.to_thread.run_sync(lambda: ana.json("sent")))["messages"] == []
        held = await trio.to_thread.run_sync(lambda: ben.json("read", "--all"))
        assert held["messages"] == []
    finally:
        for person in (ana, ben):
            if (pid := person.daemon_pid()) is not None:
                stop_pid(pid)
