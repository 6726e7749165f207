"""Fuzzing the daemon's control socket and the MCP server with real processes (finding 5).

Two people are paired on a real relay; ana's daemon then takes thousands of generated requests
over its control socket, and her ``crosstalk server`` takes generated tool calls over stdio.
Strings include lone surrogates, NUL, long and option-like text; values include deep JSON.
Every request must get exactly one answer within a bounded wait, and the daemon must survive.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.hook import control
from tests.e2e.conftest import Person, pair, people, relay_url, short_tmp

__all__ = ["people", "relay_url", "short_tmp"]  # fixtures used by name below

ANSWER_WITHIN = 30.0
ODD = [
    "\ud800",
    "a\udfffb",
    "\x00",
    "nul\x00in",
    "-rf",
    "--output=/tmp/ct-fuzz-victim",
    "diff:--output=/tmp/ct-fuzz-victim",
    "file:../../../etc/passwd",
    "file:.git/config",
    "x" * 5000,
    "ben",
    "/" + "a" * 5000,
]
strings = st.text(max_size=40) | st.sampled_from(ODD)
deep = st.integers(min_value=30, max_value=400).map(lambda n: json.loads("[" * n + "]" * n))
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | strings
values = (
    st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(strings, inner, max_size=3),
        max_leaves=8,
    )
    | deep
)
PARAM_NAMES = [
    "to", "text", "room", "id", "ids", "name", "session", "cwd", "slices", "intent", "thread",
    "reply_to", "person", "tags", "because", "why", "repo", "tell", "level", "all", "message_id",
    "index", "correlation", "status", "label", "project", "client", "note", "members",
]  # fmt: skip
# Every request/reply op except those that wait by design (wait), reach other machines through
# pairing (room_join, link_join), touch the OS keyring (secure) or dismantle the paired room.
OPS = [
    "ack", "answer", "asks", "attention", "cost", "decide", "fact_add", "fact_confirm",
    "fact_correct", "fact_forget", "facts", "health", "memory_state", "mute", "notice_shown",
    "notices", "peers", "post", "read", "read_slice", "rename", "room_accept", "room_create",
    "room_decline", "rooms", "send", "sent", "session_register", "session_status", "status",
    "task_add", "task_claim", "task_done", "task_drop", "task_release", "tasks", "trust",
    "working_set",
]  # fmt: skip
params = st.dictionaries(st.sampled_from(PARAM_NAMES) | strings, values, max_size=5)


@pytest.fixture
def paired(people: list[Person], short_tmp: Path) -> Iterator[tuple[Person, Path]]:
    """ana and ben paired, and a git project for ana's slices."""
    ana, ben = people[0], people[1]
    pair(ana, ben)
    project = short_tmp / "project"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, timeout=30)
    yield ana, project


def exchange(sock_path: Path, payload: bytes) -> list[dict[str, Any]]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(ANSWER_WITHIN)
        sock.connect(str(sock_path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def test_fuzzed_ops_on_the_control_socket_always_answer(paired: tuple[Person, Path]) -> None:
    """Every generated request to a real op gets one JSON answer; the daemon keeps serving."""
    ana, project = paired
    sock_path = ana.home / "daemon.sock"
    victim = Path("/tmp/ct-fuzz-victim")
    victim.write_text("precious\n")

    @settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
    @given(op=st.sampled_from(OPS), fields=params)
    def one(op: str, fields: dict[str, Any]) -> None:
        request = {"cwd": str(project), **fields, "v": 1, "op": op}
        (reply,) = exchange(sock_path, json.dumps(request).encode() + b"\n")
        assert isinstance(reply.get("ok"), bool)
        if reply["ok"] is False:
            assert reply["error"]["message"]

    try:
        one()
        nested = b"[" * 5000 + b"]" * 5000
        (reply,) = exchange(sock_path, b'{"v": 1, "op": "send", "text": ' + nested + b"}\n")
        assert reply["error"]["code"] == "invalid_request"
        assert control.request(sock_path, "status", timeout=ANSWER_WITHIN)["ok"] is True
        assert victim.read_text() == "precious\n"
    finally:
        victim.unlink(missing_ok=True)


class McpProcess:
    """``crosstalk server`` over raw JSON-RPC lines, with bounded reads."""

    def __init__(self, person: Person, project: Path) -> None:
        env = {
            **os.environ,
            "CROSSTALK_HOME": str(person.home),
            "CROSSTALK_RELAY": person.relay,
            "CLAUDE_CODE_SESSION_ID": "fuzz",
            "CLAUDE_PROJECT_DIR": str(project),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "crosstalk", "server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=project,
            env=env,
        )
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        # ensure_ascii: lone surrogates go out as "\ud800" escapes, as JavaScript clients send them
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self._reply(f"{method} {params!r:.200}")

    def call_raw(self, template: str) -> dict[str, Any]:
        """A request written as text, ``%d`` standing for its id."""
        self.next_id += 1
        assert self.proc.stdin is not None
        self.proc.stdin.write(template.replace("%d", str(self.next_id), 1).encode() + b"\n")
        self.proc.stdin.flush()
        return self._reply(template[:200])

    def _reply(self, what: str) -> dict[str, Any]:
        assert self._selector.select(ANSWER_WITHIN), f"no answer to {what}"
        assert self.proc.stdout is not None
        reply: dict[str, Any] = json.loads(self.proc.stdout.readline())
        assert reply["id"] == self.next_id
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._selector.close()
        assert self.proc.stdout is not None
        self.proc.stdout.close()


TOOLS = [
    "crosstalk_send", "crosstalk_read", "crosstalk_read_slice", "crosstalk_answer",
    "crosstalk_handoff", "crosstalk_peers", "crosstalk_rooms", "crosstalk_tasks",
    "crosstalk_task_add", "crosstalk_task_claim", "crosstalk_task_done", "crosstalk_facts",
    "crosstalk_remember", "crosstalk_confirm", "crosstalk_correct", "crosstalk_decide",
]  # fmt: skip
ARG_NAMES = [
    "to", "text", "intent", "thread", "reply_to", "slices", "message_id", "index", "correlation",
    "all", "room", "person", "id", "note", "tags", "because", "why", "repo", "tell",
]  # fmt: skip


def test_lone_surrogates_and_deep_json_in_mcp_tool_arguments_get_answers(
    paired: tuple[Person, Path],
) -> None:
    """``crosstalk_send`` with ``"\\ud800"`` answers (finding 5), as does 3,000-deep JSON."""
    ana, project = paired
    mcp = McpProcess(ana, project)
    try:
        mcp.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                "clientInfo": {"name": "fuzz", "version": "1"}})  # fmt: skip
        mcp.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        sent = mcp.call("tools/call", {"name": "crosstalk_send",
                                       "arguments": {"to": "ben", "text": "\ud800"}})  # fmt: skip
        assert "result" in sent
        nested = "[" * 3000 + "]" * 3000  # too deep for Python's json too: sent as raw text
        too_deep = mcp.call_raw(
            '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": '
            '"crosstalk_send", "arguments": {"to": "ben", "text": ' + nested + "}}}"
        )
        assert "request_nested_too_deeply" in json.dumps(too_deep["error"])

        @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
        @given(
            tool=st.sampled_from(TOOLS),
            arguments=st.dictionaries(st.sampled_from(ARG_NAMES), values, max_size=5),
        )
        def one(tool: str, arguments: dict[str, Any]) -> None:
            reply = mcp.call("tools/call", {"name": tool, "arguments": arguments})
            assert ("result" in reply) != ("error" in reply)

        one()
        assert mcp.proc.poll() is None
    finally:
        mcp.close()
