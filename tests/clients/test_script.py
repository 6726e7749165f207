"""The stand-in's script and request readers, without a server: matching, naming, parsing."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.script import (
    CLIENT_API,
    DEFAULT_TEXT,
    Api,
    Script,
    ToolName,
    mcp_tool_name,
)
from tests.clients.turns import offered_tools, read_turn

SEND = {"tool": "crosstalk_send", "server": "crosstalk", "call_id": "call_send_1",
        "arguments": {"text": "hi"}}


def script(*steps: object) -> Script:
    return Script.from_json({"steps": list(steps)})


def anthropic(*messages: object) -> object:
    return {"model": "m", "messages": list(messages)}


@pytest.mark.parametrize(("client", "expected"), [
    ("claude", ToolName("mcp__crosstalk__crosstalk_send")),
    ("codex", ToolName("crosstalk_send", "mcp__crosstalk")),
    ("qwen", ToolName("mcp__crosstalk__crosstalk_send")),
    ("gemini", ToolName("mcp_crosstalk_crosstalk_send")),
])
def test_mcp_tool_name_is_spelled_as_each_client_spells_it(client: str,
                                                           expected: ToolName) -> None:
    """Our server's tool gets the per-client name measured in platform-notes §5.5."""
    assert mcp_tool_name(CLIENT_API[client], "crosstalk", "crosstalk_send") == expected


def test_literal_tool_name_keeps_its_namespace_only_on_responses() -> None:
    """A tool named literally is sent as given; a namespace is used by the Responses API only."""
    steps = script({"reply": {"tool": "echo", "namespace": "mcp__x", "call_id": "c"}})
    turn = read_turn(Api.CHAT, {"messages": [{"role": "user", "content": "go"}]})
    assert steps.choose(Api.RESPONSES, turn, {}).call == ToolName("echo", "mcp__x")
    assert steps.choose(Api.CHAT, turn, {}).call == ToolName("echo")


def test_no_matching_step_gives_the_default_text() -> None:
    """With nothing matching, the answer is STANDIN-REPLY-OK from no step."""
    steps = script({"when": {"user_text_contains": "never said"}, "reply": {"text": "no"}})
    answer = steps.choose(Api.ANTHROPIC, read_turn(Api.ANTHROPIC, anthropic(
        {"role": "user", "content": "hello"})), {})
    assert (answer.step, answer.text, answer.call) == (None, DEFAULT_TEXT, None)


def test_first_matching_step_wins_and_times_limits_it() -> None:
    """Steps are tried in order; a step with times=1 stops answering after one use."""
    steps = script({"when": {"user_text_contains": "go"}, "reply": SEND, "times": 1},
                   {"when": "otherwise", "reply": {"text": "fallback"}})
    turn = read_turn(Api.ANTHROPIC, anthropic({"role": "user", "content": "go now"}))
    first = steps.choose(Api.ANTHROPIC, turn, {})
    assert (first.step, first.call_id, dict(first.arguments)) == (0, "call_send_1", {"text": "hi"})
    again = steps.choose(Api.ANTHROPIC, turn, {0: 1})
    assert (again.step, again.text) == (1, "fallback")


def test_old_history_does_not_retrigger_a_step() -> None:
    """Only what follows the model's last message counts: an answered prompt does not match."""
    steps = script({"when": {"user_text_contains": "please send"}, "reply": SEND},
                   {"when": {"tool_result_for": "call_send_1"}, "reply": {"text": "sent"}})
    body = anthropic(
        {"role": "user", "content": "please send"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_send_1"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_send_1"}]},
        {"role": "assistant", "content": "sent"},
        {"role": "user", "content": "something else"})
    assert steps.choose(Api.ANTHROPIC, read_turn(Api.ANTHROPIC, body), {}).step is None


def test_request_contains_sees_hook_context_outside_user_text() -> None:
    """request_contains finds text in a system/developer message that user_text_contains misses."""
    body = {"input": [{"type": "message", "role": "developer",
                       "content": [{"type": "input_text", "text": "CTX-MARKER"}]},
                      {"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": "hi"}]}]}
    turn = read_turn(Api.RESPONSES, body)
    assert turn.user_texts == ("hi",)
    assert script({"when": {"request_contains": "CTX-MARKER"}, "reply": {"text": "seen"}}).choose(
        Api.RESPONSES, turn, {}).text == "seen"
    assert script({"when": {"user_text_contains": "CTX-MARKER"}, "reply": {"text": "seen"}}).choose(
        Api.RESPONSES, turn, {}).step is None


def test_gemini_function_response_matches_by_name_when_its_id_differs() -> None:
    """A functionResponse with the client's own id still answers our call through its name."""
    steps = script({"when": {"tool_result_for": "call_send_1"}, "reply": {"text": "sent"}},
                   {"when": {"user_text_contains": "go"}, "reply": SEND})
    response = {"functionResponse": {"id": "mcp_crosstalk_crosstalk_send-17-ab",
                                     "name": "mcp_crosstalk_crosstalk_send", "response": {}}}
    other = {"functionResponse": {"id": "x", "name": "read_file", "response": {}}}
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "go"}]},
                                     {"role": "model", "parts": [{"functionCall": {"name": "f"}}]},
                                     {"role": "user", "parts": [response]}]}
    assert steps.choose(Api.GEMINI, read_turn(Api.GEMINI, body), {}).text == "sent"
    body["contents"][2] = {"role": "user", "parts": [other]}
    assert steps.choose(Api.GEMINI, read_turn(Api.GEMINI, body), {}).step is None


def test_gemini_json_side_request_never_uses_a_step() -> None:
    """A Gemini request for JSON output (the router) gets the default reply, not a step."""
    steps = script({"reply": {"text": "scripted"}, "times": 1})
    body = {"contents": [{"role": "user", "parts": [{"text": "go"}]}],
            "generationConfig": {"responseMimeType": "application/json"}}
    answer = steps.choose(Api.GEMINI, read_turn(Api.GEMINI, body), {})
    assert (answer.step, answer.text) == (None, DEFAULT_TEXT)


def test_readers_take_text_from_each_api_shape() -> None:
    """Plain-string and block content both give user text, in each API's own shape."""
    assert read_turn(Api.ANTHROPIC, anthropic(
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
    )).user_texts == ("a",)
    assert read_turn(Api.CHAT, {"messages": [
        {"role": "user", "content": [{"type": "text", "text": "b"}]}]}).user_texts == ("b",)
    assert read_turn(Api.RESPONSES, {"input": "c"}).user_texts == ("c",)
    assert read_turn(Api.GEMINI, {"contents": [
        {"role": "user", "parts": [{"text": "d"}]}]}).user_texts == ("d",)


def test_offered_tools_are_named_as_the_model_must_call_them() -> None:
    """Each API's tool list yields call names; Responses namespaces yield namespaced names."""
    assert offered_tools(Api.ANTHROPIC, {"tools": [{"name": "Bash"}, {"name": 3}]}) == (
        ToolName("Bash"),)
    assert offered_tools(Api.CHAT, {"tools": [
        {"type": "function", "function": {"name": "mcp__crosstalk__crosstalk_send"}}]}) == (
        ToolName("mcp__crosstalk__crosstalk_send"),)
    assert offered_tools(Api.RESPONSES, {"tools": [
        {"type": "function", "name": "shell"},
        {"type": "namespace", "name": "mcp__crosstalk",
         "tools": [{"type": "function", "name": "crosstalk_send"}]}]}) == (
        ToolName("shell"), mcp_tool_name(Api.RESPONSES, "crosstalk", "crosstalk_send"))
    assert offered_tools(Api.GEMINI, {"tools": [{"functionDeclarations": [
        {"name": "mcp_crosstalk_crosstalk_send"}]}]}) == (ToolName("mcp_crosstalk_crosstalk_send"),)
    assert offered_tools(Api.CHAT, {"tools": "none"}) == ()


def test_readers_ignore_malformed_bodies() -> None:
    """Wrongly typed fields count as absent instead of raising."""
    bodies: tuple[object, ...] = (None, [], {"messages": "x", "input": 3, "contents": {"a": 1}},
                                  {"messages": [1, None, {"role": "user", "content": 5}]})
    for api in Api:
        for body in bodies:
            turn = read_turn(api, body)
            assert (turn.user_texts, turn.tool_results) == ((), ())


@pytest.mark.parametrize(("raw", "problem"), [
    ([], "steps"),
    ({"steps": [], "extra": 1}, "unknown script keys"),
    ({"steps": [{"reply": {"text": "x"}, "times": 0}]}, "times"),
    ({"steps": [{"when": "sometimes", "reply": {"text": "x"}}]}, "when"),
    ({"steps": [{"when": {"user_text": "x"}, "reply": {"text": "x"}}]}, "unknown keys"),
    ({"steps": [{"reply": {"tool": "t", "call_id": "bad id!"}}]}, "call_id"),
    ({"steps": [{"reply": {"tool": "t", "arguments": []}}]}, "arguments"),
    ({"steps": [{"reply": {"text": 3}}]}, "text"),
    ({"steps": [{}]}, "reply"),
])
def test_bad_scripts_are_refused_with_the_field_named(raw: object, problem: str) -> None:
    """Script.from_json raises ValueError naming what is wrong."""
    with pytest.raises(ValueError, match=problem):
        Script.from_json(raw)
