"""The front end and the SDK agree on each connection's protocol era (crosstalk/mcp/front.py).

The SDK decides once, from the client's first request, whether a connection speaks the legacy
``initialize`` handshake or the modern (2026-07-28) per-request envelope. A front end that
answered a legacy ``initialize`` on a connection the SDK then served as modern told Claude Code
2.1.332 a handshake had succeeded, and its next ``tools/call`` (no envelope) was refused. These
tests hold the front end to the SDK's rule: in one process against the SDK's own answers, and
over the real ``crosstalk server`` with the lines Claude Code sends.
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
from mcp_types import CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY

from crosstalk.mcp import server as mcp_server
from crosstalk.mcp.front import (
    CAPABILITIES_KEY,
    DEEPEST,
    PRIVATE,
    VERSION_KEY,
    Era,
    Front,
    Wire,
    load_listing,
)
from crosstalk.mcp.listing import discover_probe, handshake, sdk_answers

MODERN = load_listing()["modern"][-1]
INIT, INITIALIZED, TOOLS = handshake("2025-11-25")
PROBE = discover_probe(MODERN, "server-discover-probe-1")
CALL = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "crosstalk_read", "arguments": {}}}) + "\n"
"""What Claude Code 2.1.332 sent when its probe was slow: the probe, then the legacy handshake
and a call without the envelope, none of them waiting for the probe's answer."""
CLAUDE_CODE = [PROBE, INIT, INITIALIZED, TOOLS, CALL]


@pytest.fixture
def front() -> Iterator[Front]:
    null = os.open(os.devnull, os.O_WRONLY)
    yield Front(load_listing(), Wire(null), {})
    os.close(null)


def _line(body: dict[str, Any]) -> str:
    return json.dumps(body) + "\n"


def test_the_envelope_keys_are_the_sdks() -> None:
    """The front end reads the envelope by the SDK's own key names."""
    assert (VERSION_KEY, CAPABILITIES_KEY) == (
        PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY)


def test_after_a_modern_discover_the_front_end_leaves_initialize_to_the_sdk(front: Front) -> None:
    """A discover probe opens a modern connection: the handshake after it is not answered here."""
    reply, passed = front.answer(PROBE)
    assert reply is not None and passed is not None
    assert front.era is Era.MODERN
    for line in (INIT, INITIALIZED, TOOLS, CALL):
        assert front.answer(line) == (None, line)


def test_a_modern_request_other_than_discover_opens_a_modern_connection(front: Front) -> None:
    """Only discover is answered on a modern connection, yet any enveloped request opens one."""
    ping = _line({"jsonrpc": "2.0", "id": 9, "method": "ping",
                  "params": {"_meta": {VERSION_KEY: MODERN}}})
    assert front.answer(ping) == (None, ping)
    assert front.era is Era.MODERN
    assert front.answer(INIT) == (None, INIT)


NOT_REQUESTS = [
    _line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    _line({"jsonrpc": "2.0", "id": 5, "result": {}}),
    _line({"jsonrpc": "2.0", "id": True, "method": "server/discover",
           "params": {"_meta": {VERSION_KEY: MODERN}}}),  # the SDK reads a notification
    _line({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": []}),
    _line([{"jsonrpc": "2.0", "id": 7, "method": "ping"}]),
]


@pytest.mark.parametrize("first", NOT_REQUESTS, ids=[
    "notification", "reply", "boolean-id", "list-params", "batch"])
def test_what_is_no_request_decides_nothing(front: Front, first: str) -> None:
    """Notifications, replies and malformed requests come before the first request here, too."""
    assert front.answer(first) == (None, first)
    assert front.era is Era.UNDECIDED
    reply, _ = front.answer(INIT)
    assert reply is not None and front.era is Era.LEGACY


def _deep(depth: int) -> str:
    """A modern ping whose envelope holds ``depth`` nested objects."""
    nested: dict[str, Any] = {}
    for _ in range(depth - 1):
        nested = {"x": nested}
    meta = {VERSION_KEY: MODERN, "x": nested}
    return _line({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": {"_meta": meta}})


@pytest.mark.parametrize("first", [
    "not json\n", '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}\n',
    _deep(DEEPEST - 2), "[" * 100_000 + "\n",
], ids=["not-json", "nan", "deeper-than-repair-line-allows", "too-deep-to-parse"])
def test_a_line_the_sdk_may_read_otherwise_leaves_all_to_it(front: Front, first: str) -> None:
    """Lines the SDK's reader or ``repair_line`` may see differently: the front end steps back."""
    assert front.answer(first) == (None, first)
    assert front.era is Era.UNREAD
    assert front.answer(INIT) == (None, INIT)


def test_the_front_end_steps_back_exactly_where_repair_line_rewrites(front: Front) -> None:
    """At the server's bound a line reaches the SDK as it is and decides here as there; one
    level deeper it is rewritten, and the front end has stepped back."""
    assert DEEPEST == mcp_server.MAX_DEPTH
    deepest, deeper = _deep(DEEPEST - 3), _deep(DEEPEST - 2)  # 3 levels: message, params, _meta
    assert mcp_server.repair_line(deepest) == deepest
    assert mcp_server.repair_line(deeper) != deeper
    assert front.answer(deepest) == (None, deepest)
    assert front.era is Era.MODERN


def test_a_legacy_connection_not_opened_by_initialize_is_the_sdks(front: Front) -> None:
    """A first request without the envelope opens a legacy connection; only its opening
    initialize would be ours."""
    ping = _line({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    assert front.answer(ping) == (None, ping)
    assert front.era is Era.LEGACY
    assert front.answer(INIT) == (None, INIT)


async def test_an_enveloped_initialize_is_legacy_for_both() -> None:
    """``initialize`` opens a legacy connection even with the envelope (the SDK's rule), and the
    front end's answers are the SDK's."""
    hello = json.loads(INIT)
    hello["params"]["_meta"] = {VERSION_KEY: MODERN}
    lines = [_line(hello), INITIALIZED, TOOLS]
    sdk = await sdk_answers(lines, {}, 2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        front = Front(load_listing(), Wire(null), {})
        ours = [front.answer(line)[0] for line in lines]
    finally:
        os.close(null)
    assert ours[1] is None and ours[0] is not None and ours[2] is not None
    assert [json.loads(ours[0]), json.loads(ours[2])] == sdk


def _server(tmp_path: Path, command: list[str]) -> subprocess.Popen[str]:
    env = {**os.environ, "CROSSTALK_HOME": str(tmp_path / "home")}
    return subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )


def _answers(proc: subprocess.Popen[str], lines: list[str], count: int) -> list[dict[str, Any]]:
    """Write ``lines`` at once, read ``count`` answers, hang up; the process must end cleanly."""
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(lines))
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(count)]
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()
    return answers


async def test_claude_codes_opening_is_answered_as_the_sdk_alone_answers_it(
    tmp_path: Path,
) -> None:
    """The probe, then the handshake before the probe's answer, then a call without envelope:
    every answer from ``crosstalk server`` is the SDK's own, so no legacy handshake succeeds on
    the connection the SDK serves as modern."""
    sdk = await sdk_answers(CLAUDE_CODE, {}, 4)
    with _server(tmp_path, [sys.executable, "-m", "crosstalk", "server"]) as proc:
        ours = _answers(proc, CLAUDE_CODE, 4)
    assert {a["id"]: a for a in ours} == {a["id"]: a for a in sdk}
    assert "error" in {a["id"]: a for a in ours}[1]  # initialize, refused on a modern connection


# The front end alone, as ``crosstalk server`` runs it before the SDK has imported: it never
# imports the SDK, so whatever it answers, it answered itself. It reports what it queued for the
# SDK and which MCP modules it loaded.
FRONT_ONLY = """
import sys
from crosstalk.mcp.front import start
started = start()
sys.stderr.write(started.front.lines.get() or "")
sys.stderr.write(repr(sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))))
"""


def test_the_discover_probe_is_answered_before_the_sdk_is_there(tmp_path: Path) -> None:
    """The probe is answered by the front end alone, and passed on under a private id."""
    with _server(tmp_path, [sys.executable, "-c", FRONT_ONLY]) as proc:
        (answer,) = _answers(proc, [PROBE], 1)
        assert proc.stderr is not None
        passed, loaded = proc.stderr.read().split("\n", 1)
    assert answer == {"jsonrpc": "2.0", "id": "server-discover-probe-1",
                      "result": load_listing()["discover"][MODERN]}
    assert json.loads(passed)["id"] == f"{PRIVATE}1"
    assert loaded == "[]"
