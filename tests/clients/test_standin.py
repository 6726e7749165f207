"""The stand-in model server over real HTTP: each API's replies, the request log, the process."""

from __future__ import annotations

import gzip
import http.client
import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.process import StandinProcess, read_log
from tests.clients.script import DEFAULT_TEXT, Script, ToolName
from tests.clients.standin import Standin

SEND = {"tool": "crosstalk_send", "server": "crosstalk", "call_id": "call_send_1",
        "arguments": {"room": "r1", "text": "hello there"}}
STEPS = [
    {"when": {"tool_result_for": "call_send_1"},
     "reply": {"text": "sent", "echo_tool_result": True}},
    {"when": {"user_text_contains": "please send"}, "reply": SEND},
]


class Reply:
    """A response as the test client saw it; its JSON is ``Any``, as the tests index into it."""

    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[tuple[str | None, Any]]:
        """The SSE events as (event name or None, parsed data); ``[DONE]`` stays a string."""
        assert self.headers["Content-Type"] == "text/event-stream"
        out: list[tuple[str | None, Any]] = []
        for block in self.body.decode().split("\n\n"):
            if not block.strip():
                continue
            fields = dict(line.split(": ", 1) for line in block.split("\n"))
            data = fields["data"]
            out.append((fields.get("event"), data if data == "[DONE]" else json.loads(data)))
        return out


def request(url: str, method: str, path: str, body: object = None,
            headers: dict[str, str] | None = None, raw: bytes | None = None) -> Reply:
    """One request on a fresh connection, with a 10 s socket timeout."""
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json", **(headers or {})})
        response = conn.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        conn.close()


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[Standin]:
    """An in-process stand-in playing STEPS, logging to tmp_path/requests.jsonl."""
    with Standin(Script.from_json({"steps": STEPS}), tmp_path / "requests.jsonl") as server:
        yield server


def post(server: Standin, path: str, body: object) -> Reply:
    reply = request(server.url, "POST", path, body)
    assert reply.status == 200, reply.body
    return reply


# --- Anthropic Messages ----------------------------------------------------------------------

ANTHROPIC_EVENTS = ["message_start", "content_block_start", "content_block_delta",
                    "content_block_stop", "message_delta", "message_stop"]


def test_anthropic_stream_sends_the_measured_event_sequence(standin: Standin) -> None:
    """A streamed Messages reply is the six-event sequence Claude Code accepts, with text."""
    body = {"model": "claude-any", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    events = post(standin, "/v1/messages?beta=true", body).events()
    assert [name for name, _ in events] == ANTHROPIC_EVENTS
    assert all(isinstance(data, dict) and data["type"] == name for name, data in events)
    start, block, delta = (events[i][1] for i in range(3))
    assert start["message"]["model"] == "claude-any"
    assert block == {"type": "content_block_start", "index": 0,
                     "content_block": {"type": "text", "text": ""}}
    assert delta["delta"] == {"type": "text_delta", "text": DEFAULT_TEXT}
    assert events[4][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_scripted_tool_call_streams_as_tool_use(standin: Standin) -> None:
    """Matching user text gets a tool_use with the Claude-style MCP name and whole-JSON input."""
    body = {"model": "m", "stream": True,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "please send"}]}]}
    events = dict(post(standin, "/v1/messages", body).events())
    assert events["content_block_start"]["content_block"] == {
        "type": "tool_use", "id": "call_send_1", "name": "mcp__crosstalk__crosstalk_send",
        "input": {}}
    delta = events["content_block_delta"]["delta"]
    assert delta["type"] == "input_json_delta"
    assert json.loads(delta["partial_json"]) == SEND["arguments"]
    assert events["message_delta"]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_tool_result_gets_the_follow_up_reply(standin: Standin) -> None:
    """A tool_result for our call, sent back non-streaming, gets the follow-up step's text."""
    body = {"model": "m", "messages": [
        {"role": "user", "content": "please send"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_send_1",
                                           "name": "mcp__crosstalk__crosstalk_send", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_send_1",
                                      "content": "delivered"}]}]}
    message = post(standin, "/v1/messages", body).json()
    assert isinstance(message, dict) and message["type"] == "message"
    assert message["content"] == [{"type": "text", "text": 'sent tool_result="delivered"'}]
    assert message["stop_reason"] == "end_turn"


def test_head_and_unknown_get_are_json_404s_and_count_tokens_counts(standin: Standin) -> None:
    """HEAD / and GET anything answer 404 (JSON error); count_tokens answers a positive count."""
    head = request(standin.url, "HEAD", "/")
    assert (head.status, head.body) == (404, b"")
    get = request(standin.url, "GET", "/v1/models")
    assert get.status == 404
    assert get.json()["error"]["type"] == "not_found_error"
    count = post(standin, "/v1/messages/count_tokens", {"messages": [{"role": "user",
                                                                      "content": "x" * 400}]})
    assert count.json()["input_tokens"] >= 100
    assert request(standin.url, "POST", "/v2/elsewhere", {}).status == 404


# --- OpenAI Responses ------------------------------------------------------------------------


def test_responses_stream_text_sequence_ends_completed_with_usage(standin: Standin) -> None:
    """A text reply streams created, item added, text delta, item done, completed (with usage)."""
    body = {"model": "standin-model", "stream": True,
            "input": [{"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hello"}]}]}
    events = post(standin, "/v1/responses", body).events()
    assert [name for name, _ in events] == [
        "response.created", "response.output_item.added", "response.output_text.delta",
        "response.output_item.done", "response.completed"]
    assert [data["sequence_number"] for _, data in events] == [0, 1, 2, 3, 4]
    assert events[2][1]["delta"] == DEFAULT_TEXT
    done = events[3][1]["item"]
    assert done["type"] == "message" and done["content"][0] == {
        "type": "output_text", "text": DEFAULT_TEXT, "annotations": []}
    completed = events[4][1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["total_tokens"] == 15
    assert completed["output"] == [done]


def test_responses_tool_call_uses_the_codex_namespace_and_follows_up(standin: Standin) -> None:
    """A scripted MCP call is a function_call in namespace mcp__crosstalk; its output follows up."""
    ask = [{"role": "user", "content": [{"type": "input_text", "text": "please send"}]}]
    events = post(standin, "/v1/responses", {"stream": True, "input": ask}).events()
    assert [name for name, _ in events] == [
        "response.created", "response.output_item.added", "response.output_item.done",
        "response.completed"]
    item = events[2][1]["item"]
    assert {k: item[k] for k in ("type", "call_id", "name", "namespace")} == {
        "type": "function_call", "call_id": "call_send_1", "name": "crosstalk_send",
        "namespace": "mcp__crosstalk"}
    assert json.loads(item["arguments"]) == SEND["arguments"]
    output = {"type": "function_call_output", "call_id": "call_send_1", "output": "ok"}
    follow = [*ask, item, output]
    events = post(standin, "/v1/responses", {"stream": True, "input": follow}).events()
    assert events[2][1]["delta"] == 'sent tool_result="ok"'


# --- OpenAI Chat Completions -----------------------------------------------------------------


def test_chat_stream_text_chunks_end_with_done(standin: Standin) -> None:
    """Chat chunks carry the text, then finish_reason stop with usage, then data: [DONE]."""
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hello"}]}
    events = post(standin, "/v1/chat/completions", body).events()
    assert [name for name, _ in events] == [None, None, None]
    first, last, done = (data for _, data in events)
    assert done == "[DONE]"
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["content"] == DEFAULT_TEXT
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["usage"]["total_tokens"] == 15


def test_chat_tool_call_and_tool_message_follow_up(standin: Standin) -> None:
    """A scripted call streams as tool_calls (Qwen-style name); a tool message follows it up."""
    ask = [{"role": "system", "content": "you are"}, {"role": "user", "content": "please send"}]
    events = post(standin, "/v1/chat/completions", {"stream": True, "messages": ask}).events()
    call = events[0][1]["choices"][0]["delta"]["tool_calls"][0]
    assert (call["id"], call["type"], call["function"]["name"]) == (
        "call_send_1", "function", "mcp__crosstalk__crosstalk_send")
    assert json.loads(call["function"]["arguments"]) == SEND["arguments"]
    assert events[1][1]["choices"][0]["finish_reason"] == "tool_calls"
    follow = [*ask, {"role": "assistant", "content": None, "tool_calls": [call]},
              {"role": "tool", "tool_call_id": "call_send_1", "content": "ok"}]
    reply = post(standin, "/v1/chat/completions", {"messages": follow}).json()
    assert reply["choices"][0]["message"] == {
        "role": "assistant", "content": 'sent tool_result="ok"'}


# --- Gemini ----------------------------------------------------------------------------------

GEMINI = "/v1beta/models/gemini-3.1-pro-preview"


def test_gemini_generate_content_answers_text_json(standin: Standin) -> None:
    """generateContent answers one JSON response whose candidate holds the default text."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
    reply = post(standin, f"{GEMINI}:generateContent", body).json()
    assert reply["candidates"][0]["content"] == {
        "role": "model", "parts": [{"text": DEFAULT_TEXT}]}
    assert reply["candidates"][0]["finishReason"] == "STOP"


def test_gemini_stream_function_call_and_function_response(standin: Standin) -> None:
    """alt=sse streams a functionCall named mcp_srv_tool; its functionResponse follows it up."""
    ask = [{"role": "user", "parts": [{"text": "please send"}]}]
    path = f"{GEMINI}:streamGenerateContent?alt=sse"
    (name, chunk), = post(standin, path, {"contents": ask}).events()
    assert name is None
    part = chunk["candidates"][0]["content"]["parts"][0]
    assert part == {"functionCall": {"name": "mcp_crosstalk_crosstalk_send",
                                     "args": SEND["arguments"], "id": "call_send_1"}}
    response = {"functionResponse": {"id": "call_send_1", "name": "mcp_crosstalk_crosstalk_send",
                                     "response": {"output": "ok"}}}
    follow = [*ask, {"role": "model", "parts": [part]}, {"role": "user", "parts": [response]}]
    (_, chunk), = post(standin, path, {"contents": follow}).events()
    assert chunk["candidates"][0]["content"]["parts"] == [
        {"text": 'sent tool_result={"output": "ok"}'}]


def test_gemini_stream_without_sse_is_a_json_array(standin: Standin) -> None:
    """streamGenerateContent without alt=sse answers a JSON array of responses."""
    body = {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}
    reply = post(standin, f"{GEMINI}:streamGenerateContent", body).json()
    assert isinstance(reply, list) and len(reply) == 1
    assert reply[0]["candidates"][0]["content"]["parts"] == [{"text": DEFAULT_TEXT}]


# --- the request log and odd bodies ----------------------------------------------------------


def test_log_records_each_request_without_secrets(standin: Standin) -> None:
    """Every request is logged with method, path, headers and body; keys and tokens are not."""
    secrets = {"Authorization": "Bearer s3cret", "x-api-key": "s3cret", "x-goog-api-key": "s3cret"}
    marker = {"role": "system", "content": "CROSSTALK-WORKING-SET-MARKER"}
    request(standin.url, "POST", "/v1/messages?beta=true",
            {"stream": True, "tools": [{"name": "mcp__crosstalk__crosstalk_send"}],
             "messages": [marker, {"role": "user", "content": "please send"}]},
            headers={**secrets, "X-Claude-Code-Session-Id": "sess-1"})
    request(standin.url, "POST", f"{GEMINI}:streamGenerateContent?alt=sse&key=s3cret",
            {"contents": []})
    request(standin.url, "HEAD", "/")
    first, second, third = read_log(standin.log.path)
    assert (first.api, first.method, first.path, first.step) == (
        "anthropic", "POST", "/v1/messages?beta=true", 1)
    assert first.contains("CROSSTALK-WORKING-SET-MARKER") and not first.contains("absent-words")
    assert first.headers["X-Claude-Code-Session-Id"] == "sess-1"
    assert first.tools() == (ToolName("mcp__crosstalk__crosstalk_send"),)
    assert third.tools() == ()
    assert (second.api, second.path, second.step) == (
        "gemini", f"{GEMINI}:streamGenerateContent?alt=sse", None)
    assert (third.method, third.body) == ("HEAD", None)
    assert "s3cret" not in standin.log.path.read_text()


def test_unreadable_body_is_a_logged_400(standin: Standin) -> None:
    """A body that is not JSON gets a 400 and is still logged, with the reason."""
    reply = request(standin.url, "POST", "/v1/messages", raw=b"{not json")
    assert reply.status == 400 and reply.json()["error"]["type"] == "invalid_request_error"
    logged = json.loads(standin.log.path.read_text())
    assert logged["body"] is None and "Expecting property name" in logged["error"]


def test_chunked_and_gzip_bodies_are_decoded(standin: Standin) -> None:
    """Chunked transfer encoding and a gzip Content-Encoding both reach the script intact."""
    body = json.dumps({"messages": [{"role": "user", "content": "please send"}]}).encode()
    host, port = standin.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("POST", "/v1/messages", body=iter([body[:10], body[10:]]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        chunked = conn.getresponse().read()
        conn.request("POST", "/v1/messages", body=gzip.compress(body),
                     headers={"Content-Encoding": "gzip"})  # same connection: keep-alive works
        zipped = conn.getresponse().read()
    finally:
        conn.close()
    for raw in (chunked, zipped):
        assert json.loads(raw)["content"][0]["name"] == "mcp__crosstalk__crosstalk_send"


# --- the process -----------------------------------------------------------------------------


def test_process_listens_on_loopback_serves_and_stops_by_pid(tmp_path: Path) -> None:
    """The subprocess prints its 127.0.0.1 URL first, plays its script, and dies on SIGTERM."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"reply": {"text": "from the script"}}]}))
    with StandinProcess(tmp_path / "log.jsonl", script=script) as server:
        assert server.url.startswith("http://127.0.0.1:")
        body = {"messages": [{"role": "user", "content": "hi"}]}
        reply = request(server.url, "POST", "/v1/messages", body).json()
        assert reply["content"] == [{"type": "text", "text": "from the script"}]
        assert [r.body for r in server.requests()] == [body]
        assert server.stop() == -signal.SIGTERM
    assert server.proc is None


def test_process_binds_only_127_0_0_1(tmp_path: Path) -> None:
    """Another loopback address on the same port is refused: the socket is not on 0.0.0.0."""
    with StandinProcess(tmp_path / "log.jsonl") as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        with pytest.raises(OSError), socket.create_connection(("127.0.0.2", port), timeout=5):
            pass


def test_process_exits_by_itself_when_its_lifetime_ends(tmp_path: Path) -> None:
    """With --lifetime 0.5 the server stops unbidden, exit status 0, and says why."""
    server = StandinProcess(tmp_path / "log.jsonl", lifetime=0.5)
    server.start()
    try:
        status, rest = server.wait_exited(timeout=20)
    finally:
        server.stop()
    assert status == 0
    assert json.loads(rest) == {"stopped": "lifetime"}


def test_process_refuses_a_bad_script(tmp_path: Path) -> None:
    """A script with an unknown key stops the server before it listens, naming the problem."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"reply": {"text": "x"}, "wen": "otherwise"}]}))
    server = StandinProcess(tmp_path / "log.jsonl", script=script)
    with pytest.raises(RuntimeError, match=r"unknown keys \['wen'\]"):
        server.start()
    assert server.proc is None
