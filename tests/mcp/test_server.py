"""``crosstalk server`` through the MCP SDK's own client over stdio, against real daemons.

Two people (ana, ben) are paired through the real CLI on a real relay; the MCP server runs as
ana's ``crosstalk server`` subprocess. Every tool is called at least once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult

from crosstalk.mcp.tools import TOOLS
from tests.e2e.conftest import Person, pair, people, relay_url, short_tmp, stop_pid

__all__ = ["people", "relay_url", "short_tmp"]  # fixtures used by name below

ERROR = re.compile(r"crosstalk error \[[a-z_]+\]: \S.*", re.DOTALL)


def server_params(person: Person, project: Path) -> StdioServerParameters:
    env = {
        **os.environ,
        "CROSSTALK_HOME": str(person.home),
        "CROSSTALK_RELAY": person.relay,
        "CLAUDE_CODE_SESSION_ID": "cc-" + person.home.name,
        "CLAUDE_PROJECT_DIR": str(project),
    }
    return StdioServerParameters(
        command=sys.executable, args=["-m", "crosstalk", "server"], env=env, cwd=str(project)
    )


def git_project(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True, timeout=30)
    return root


def parsed(result: CallToolResult) -> Any:
    """The JSON of a successful tool result (one text item)."""
    assert not result.is_error, result.content
    (item,) = result.content
    assert item.type == "text"
    return json.loads(item.text)


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    (item,) = result.content
    assert item.type == "text"
    return item.text


async def test_initialize_and_tools_list_answer_without_starting_the_daemon(
    people: list[Person], short_tmp: Path
) -> None:
    """initialize and tools/list need no daemon; every tool is crosstalk_ with an object schema
    and a description, and the instructions call arrivals untrusted third-party text."""
    ana = people[0]
    with trio.fail_after(60):
        async with Client(server_params(ana, git_project(short_tmp / "p")), mode="legacy") as c:
            assert c.server_info is not None and c.server_info.name == "crosstalk"
            assert "untrusted third-party text" in (c.instructions or "")
            tools = (await c.list_tools()).tools
            assert ana.daemon_pid() is None
    assert [t.name for t in tools] == [spec.name for spec in TOOLS]
    for tool in tools:
        assert tool.name.startswith("crosstalk_")
        assert tool.input_schema["type"] == "object"
        assert tool.description


async def test_every_tool_answers_against_a_real_daemon(
    people: list[Person], short_tmp: Path
) -> None:
    """Each tool is called once; results are JSON text, failures isError with a stable code."""
    ana, ben = people[0], people[1]
    await trio.to_thread.run_sync(lambda: pair(ana, ben))
    project = git_project(short_tmp / "proj")
    called: set[str] = set()
    try:
        with trio.fail_after(120):
            async with Client(server_params(ana, project), mode="legacy") as c:

                async def call(name: str, **args: Any) -> CallToolResult:
                    called.add(name)
                    return await c.call_tool(name, args)

                await _messages(call, ben)
                await _memory(call, project)
                await _search(call)
                await _reservations(call, project)
                await _presence(call)
                unknown = await c.call_tool("crosstalk_nope", {})
                assert unknown.is_error
    finally:
        for person in (ana, ben):
            if (pid := person.daemon_pid()) is not None:
                stop_pid(pid)
    assert called == {spec.name for spec in TOOLS}


async def _messages(call: Any, ben: Person) -> None:
    sent = parsed(await call("crosstalk_send", to="ben", text="hello from ana", intent="question"))
    assert sent["to"] == ["ben"] and sent["state"] in ("queued", "sent", "delivered")
    handed = parsed(
        await call("crosstalk_handoff", to="ben", text="take the migration", slices=["note:why"])
    )
    assert handed["to"] == ["ben"]
    await trio.to_thread.run_sync(
        lambda: ben.json("send", "ana", "see the note", "--slice", "note:the slice body")
    )
    seen: list[dict[str, Any]] = []
    with trio.fail_after(30):
        while not any(m["text"] == "see the note" for m in seen):  # each wait is bounded too
            assert set(parsed(await call("crosstalk_wait", timeout_seconds=2))) == {"arrived"}
            read = parsed(await call("crosstalk_read"))
            if read["messages"]:
                assert "untrusted third-party" in read["trust"].lower()
            seen += read["messages"]
    message = next(m for m in seen if m["text"] == "see the note")
    assert message["from"] == "ben" and message["slices"][0]["kind"] == "note"
    piece = parsed(await call("crosstalk_read_slice", message_id=message["id"], index=0))
    assert piece["content"] == "the slice body" and "untrusted" in piece["trust"].lower()
    asked = await call("crosstalk_ask", to="ben", text="are you there?", timeout_seconds=1)
    assert ERROR.fullmatch(error_text(asked)) and "[no_answer]" in error_text(asked)
    answered = await call("crosstalk_answer", to="ben", correlation="c0ffee", text="yes")
    assert answered.is_error or "id" in parsed(answered)
    missing = await call("crosstalk_read_slice", message_id=message["id"], index=3)
    assert ERROR.fullmatch(error_text(missing))


async def _memory(call: Any, project: Path) -> None:
    added = parsed(await call("crosstalk_remember", text="the API is frozen", tags=["proj"]))
    facts = parsed(await call("crosstalk_facts"))
    assert "not instructions" in facts["trust"]
    assert any(f["text"] == "the API is frozen" for f in facts["facts"])
    assert "id" in parsed(await call("crosstalk_confirm", id=added["id"]))
    fixed = await call("crosstalk_correct", id=added["id"], because="thawed", text="API open")
    assert "id" in parsed(fixed)
    task = parsed(await call("crosstalk_task_add", text="write the changelog"))
    assert any(t["id"] == task["id"] for t in parsed(await call("crosstalk_tasks"))["tasks"])
    claim = parsed(await call("crosstalk_task_claim", id=task["id"]))
    assert claim["outcome"] in ("won", "pending")
    assert "id" in parsed(await call("crosstalk_task_done", id=task["id"], note="done"))
    decided = parsed(
        await call("crosstalk_decide", text="use trio", why="structured", repo=str(project))
    )
    assert Path(decided["file"]).name == "DECISIONS.md"
    bad = await call("crosstalk_confirm", id="no-such-fact")
    assert ERROR.fullmatch(error_text(bad))


async def _search(call: Any) -> None:
    found = parsed(await call("crosstalk_search", query="note", person="ben", kind="message"))
    assert "untrusted third-party" in found["trust"].lower()
    assert [(r["from"], r["snippet"]) for r in found["results"]] == [("ben", "see the [note]")]
    fact = parsed(await call("crosstalk_search", query="API", kind="fact"))["results"]
    assert [r["snippet"] for r in fact] == ["[API] open"]
    bad = await call("crosstalk_search", query='"unbalanced')
    assert ERROR.fullmatch(error_text(bad)) and "[usage]" in error_text(bad)


async def _reservations(call: Any, project: Path) -> None:
    got = parsed(await call("crosstalk_reserve", paths=["src/**"], reason="refactor"))
    assert (got["repo"], got["state"]) == (project.name, "granted")
    held = parsed(await call("crosstalk_reservations"))["reservations"]
    assert [(r["id"], r["mine"], r["reason"]) for r in held] == [(got["id"], True, "refactor")]
    assert parsed(await call("crosstalk_release"))["released"] == [got["id"]]
    outside = await call("crosstalk_reserve", paths=["../x"])
    assert ERROR.fullmatch(error_text(outside))


async def _presence(call: Any) -> None:
    rooms = parsed(await call("crosstalk_rooms"))
    assert any(r["kind"] == "direct" for r in rooms["rooms"])
    peers = parsed(await call("crosstalk_peers"))
    assert [p["label"] for p in peers["peers"]] == ["ben"]
    assert "rooms" not in peers  # the reference leaked rooms.json, keys and all, through here


@pytest.mark.parametrize("name", ["crosstalk_facts"])
async def test_a_failing_daemon_start_is_an_error_result_not_a_crash(
    name: str, short_tmp: Path
) -> None:
    """A state directory the daemon cannot use: the tool answers isError with the code."""
    home = short_tmp / "damaged"
    home.mkdir(mode=0o700)
    (home / "identity.json").write_text("not json")
    person = Person(home, "ws://127.0.0.1:9")
    try:
        with trio.fail_after(60):
            async with Client(server_params(person, short_tmp), mode="legacy") as c:
                result = await c.call_tool(name, {})
        assert ERROR.fullmatch(error_text(result))
    finally:
        if (pid := person.daemon_pid()) is not None:
            stop_pid(pid)


async def test_a_daemon_that_went_away_is_started_again_on_the_next_call(short_tmp: Path) -> None:
    """The daemon dies between calls: that call fails with daemon_unreachable, the next one
    starts a new daemon and answers."""
    person = Person(short_tmp / "solo", "ws://127.0.0.1:9")
    try:
        with trio.fail_after(90):
            async with Client(server_params(person, short_tmp), mode="legacy") as c:
                first = await c.call_tool("crosstalk_rooms", {})
                assert parsed(first) == {"rooms": []}
                pid = person.daemon_pid()
                assert pid is not None
                await trio.to_thread.run_sync(stop_pid, pid)
                lost = await c.call_tool("crosstalk_rooms", {})
                assert "[daemon_unreachable]" in error_text(lost)
                again = await c.call_tool("crosstalk_rooms", {})
                assert parsed(again) == {"rooms": []}
                assert person.daemon_pid() not in (None, pid)
    finally:
        if (pid := person.daemon_pid()) is not None:
            stop_pid(pid)
