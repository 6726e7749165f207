"""The MCP front end (crosstalk/mcp/front.py) answers exactly as the SDK would, and loses nothing.

``crosstalk/mcp/front.json`` is what the SDK server itself answers; these tests run the SDK in this
process for every protocol version it negotiates (and one it does not), legacy ``initialize``
and modern ``server/discover`` alike, with channel pushes on and off, and compare its answers
with the front end's, so the file can never drift from the SDK. How the two agree on a
connection's era: ``tests/mcp/test_front_eras.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from crosstalk.mcp import front as mcp_front
from crosstalk.mcp.front import LISTING, PRIVATE, Front, Wire, load_listing
from crosstalk.mcp.listing import (
    discover_probe,
    front_listing,
    handshake,
    render_listing,
    sdk_answers,
)


async def test_the_committed_listing_is_the_sdks_own() -> None:
    committed = await trio.Path(LISTING).read_text(encoding="utf-8")
    assert committed == render_listing(await front_listing()), (
        "crosstalk/mcp/front.json is stale: python -m crosstalk.mcp.listing --write-front"
    )


@pytest.fixture(autouse=True)
def _null_fd() -> Iterator[None]:
    global _NULL
    _NULL = os.open(os.devnull, os.O_WRONLY)
    yield
    os.close(_NULL)


_NULL = -1


def _front(env: dict[str, str]) -> Front:
    return Front(load_listing(), Wire(_NULL), env)


@pytest.mark.parametrize("channels", ["", "1"])
async def test_the_front_end_answers_as_the_sdk_does(channels: str) -> None:
    env = {"CROSSTALK_CHANNELS": channels}
    for version in [*load_listing()["versions"], "1999-01-01", "2026-07-28"]:
        lines = handshake(version)
        sdk = await sdk_answers(lines, env, 2)
        front = _front(env)
        ours = [front.answer(line)[0] for line in lines]
        assert ours[1] is None  # `initialized` is the SDK's
        assert [json.loads(ours[0] or ""), json.loads(ours[2] or "")] == sdk, version


@pytest.mark.parametrize("channels", ["", "1"])
async def test_the_front_end_answers_discover_as_the_sdk_does(channels: str) -> None:
    """Every modern version the SDK serves is answered as the SDK does; others are the SDK's."""
    env = {"CROSSTALK_CHANNELS": channels}
    modern = load_listing()["modern"]
    assert modern
    for version in [*modern, "2099-01-01", "2025-11-25"]:
        probe = discover_probe(version, "probe")
        (sdk,) = await sdk_answers([probe], env, 1)
        reply, passed = _front(env).answer(probe)
        if version in modern:
            assert reply is not None and json.loads(reply) == sdk, version
            assert passed is not None and json.loads(passed)["id"] == f"{PRIVATE}1"
        else:
            assert (reply, passed) == (None, probe), version
            assert "error" in sdk, version


def test_initialize_is_passed_on_under_a_private_id_and_its_answer_dropped() -> None:
    front = _front({})
    init, initialized, tools = handshake("2025-06-18")
    reply, passed = front.answer(init)
    assert reply is not None and json.loads(reply)["id"] == 1
    assert passed is not None and json.loads(passed)["id"] == f"{PRIVATE}1"
    assert front.answer(initialized) == (None, initialized)
    reply, passed = front.answer(tools)
    assert reply is not None and passed is None
    assert mcp_front._private_reply(json.dumps({"jsonrpc": "2.0", "id": f"{PRIVATE}1",
                                                "result": {}}))
    assert not mcp_front._private_reply(json.dumps({"jsonrpc": "2.0", "id": 1, "result": {
        "text": PRIVATE}}))


def test_what_the_front_end_would_not_answer_exactly_goes_to_the_sdk() -> None:
    init, _, tools = handshake("2025-06-18")
    assert _front({}).answer(tools) == (None, tools)  # before initialize: the SDK's answer
    odd = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
    assert _front({}).answer(odd) == (None, odd)
    front = _front({})
    front.answer(init)
    assert front.answer(init) == (None, init)  # a second initialize
    paged = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
                        "params": {"cursor": "x"}})
    assert front.answer(paged) == (None, paged)
    deep = '{"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": ' + "[" * 5000
    assert front.answer(deep) == (None, deep)


def test_after_the_hand_over_every_line_is_queued_in_order() -> None:
    front = _front({})
    init, initialized, tools = handshake("2025-06-18")
    front.take(init)
    front.hand_over()
    front.take(initialized)
    front.take(tools)
    front.end()
    queued = []
    while (line := front.lines.get()) is not None:
        queued.append(json.loads(line))
    assert [q.get("id") for q in queued] == [f"{PRIVATE}1", None, 2]


def test_requests_sent_before_the_sdk_is_ready_are_all_answered(tmp_path: Path) -> None:
    """Everything at once, before the SDK could have imported: every request answered once,
    no private id on the wire."""
    init, initialized, tools = handshake("2025-11-25")
    ping = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}) + "\n"
    unknown = json.dumps({"jsonrpc": "2.0", "id": 4, "method": "no/such"}) + "\n"
    env = {**os.environ, "CROSSTALK_HOME": str(tmp_path / "home")}
    with subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "server"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    ) as proc:
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(init + initialized + tools + ping + unknown)
            proc.stdin.flush()
            answers = [json.loads(proc.stdout.readline()) for _ in range(4)]
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0
            assert proc.stdout.read() == ""
        finally:
            if proc.poll() is None:
                proc.kill()
    answers_typed: list[dict[str, Any]] = answers
    assert sorted(a["id"] for a in answers_typed) == [1, 2, 3, 4]
    by_id = {a["id"]: a for a in answers_typed}
    assert by_id[1]["result"]["protocolVersion"] == "2025-11-25"
    assert len(by_id[2]["result"]["tools"]) == len(load_listing()["tools"]["tools"])
    assert by_id[3]["result"] == {}
    assert by_id[4]["error"]["code"] == -32601
