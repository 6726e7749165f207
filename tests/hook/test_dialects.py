"""Golden answers of every hook dialect: exact stdout per client and event, text or none."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from crosstalk.core.dialects import CLIENTS, Decision, dialect_for
from crosstalk.errors import LocalProtocolError

TEXT = 'crosstalk says: <crosstalk-notice from="marie">\nline two</crosstalk-notice>'
LONG = "x" * 20_000

Answer = Callable[[str, str], object]


def hso(event: str, text: str) -> object:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def none(event: str, text: str) -> object:
    return None


# client -> event -> how its answer carries text (None: the event never carries text).
GOLDEN: dict[str, dict[str, Answer]] = {
    "claude": {
        "SessionStart": hso,
        "UserPromptSubmit": hso,
        "PostToolUse": hso,
        "PreToolUse": none,
        "Stop": none,
    },
    "codex": {
        "SessionStart": hso,
        "UserPromptSubmit": hso,
        "PreToolUse": none,
        "PostToolUse": hso,
        "Stop": none,
    },
    "qwen": {
        "SessionStart": hso,
        "UserPromptSubmit": hso,
        "PreToolUse": none,
        "PostToolUse": hso,
        "Stop": none,
    },
    "gemini": {
        "SessionStart": hso,
        "BeforeAgent": hso,
        "AfterTool": hso,
        "BeforeTool": none,
        "AfterAgent": none,
    },
    "cursor": {
        "sessionStart": lambda e, t: {"additional_context": t},
        "postToolUse": lambda e, t: {"additional_context": t},
        "postToolUseFailure": lambda e, t: {"additional_context": t},
        "beforeSubmitPrompt": none,
        "preToolUse": none,
        "afterFileEdit": none,
        "stop": none,
    },
    "agy": {
        "PreInvocation": lambda e, t: {"injectSteps": [{"ephemeralMessage": t}]},
        "PreToolUse": none,
    },
    "kimi": {
        "UserPromptSubmit": lambda e, t: {"message": t},
        "SessionStart": none,
        "PreToolUse": none,
        "PostToolUse": none,
        "Stop": none,
    },
    "hermes": {
        "pre_llm_call": lambda e, t: {"context": t},
        "on_session_start": none,
        "pre_tool_call": none,
        "post_tool_call": none,
        "on_session_end": none,
    },
    "goose": {
        "Stop": lambda e, t: {"decision": "block", "reason": t},
        "SessionStart": none,
        "UserPromptSubmit": none,
        "PreToolUse": none,
        "PostToolUse": none,
    },
}
EMPTY: dict[str, dict[str, str]] = {client: {} for client in CLIENTS} | {
    "goose": {"decision": "allow"}
}
CASES = [(client, event) for client, events in GOLDEN.items() for event in events]
CARRYING = [(client, event) for client, event in CASES if GOLDEN[client][event] is not none]


def payload_for(client: str, event: str) -> str:
    """A minimal payload as the client would send it (Antigravity sends no event name)."""
    if client == "agy":
        return json.dumps({"conversationId": "c1", "invocationNum": 2})
    if client == "goose":
        return json.dumps({"event": event, "session_id": "s1"})
    return json.dumps({"hook_event_name": event, "session_id": "s1", "cwd": "/repo"})


def answer(client: str, event: str, text: str | None) -> str:
    dialect = dialect_for(client)
    return dialect.render(dialect.parse(event, payload_for(client, event)), text)


def test_golden_table_covers_every_client_and_registered_event() -> None:
    """Every client has golden cases, including every event its installer registers."""
    assert set(GOLDEN) == set(CLIENTS)
    for client in CLIENTS:
        assert set(dialect_for(client).registered) <= set(GOLDEN[client]), client


@pytest.mark.parametrize(("client", "event"), CASES)
def test_answer_with_text_has_exactly_the_clients_keys(client: str, event: str) -> None:
    """With text, the answer is the client's exact shape, or its empty answer if it cannot carry."""
    expected = GOLDEN[client][event](event, TEXT)
    got = json.loads(answer(client, event, TEXT))
    assert got == (EMPTY[client] if expected is None else expected)


@pytest.mark.parametrize(("client", "event"), CASES)
def test_answer_without_text_is_the_empty_answer(client: str, event: str) -> None:
    """None and "" both give the client's empty answer: {} (Goose: allow)."""
    assert json.loads(answer(client, event, None)) == EMPTY[client]
    assert json.loads(answer(client, event, "")) == EMPTY[client]


@pytest.mark.parametrize(("client", "event"), CARRYING)
def test_long_text_passes_whole_except_to_cursor(client: str, event: str) -> None:
    """Only Cursor limits context length; every other client gets all 20,000 characters."""
    got = json.loads(answer(client, event, LONG))
    flat = json.dumps(got)
    if client == "cursor":
        assert len(got["additional_context"]) <= 10_000
        assert "cut the last" in got["additional_context"]
    else:
        assert LONG in flat


@pytest.mark.parametrize("client", CLIENTS)
def test_stdout_is_compact_ascii_json(client: str) -> None:
    """Answers are ASCII, compact and newline-free, whatever the text holds."""
    dialect = dialect_for(client)
    event = dialect.registered[-1] if client == "goose" else dialect.registered[0]
    out = answer(client, event, "café ☕ \U0001f600 \ud800 end")
    assert out.isascii()
    assert "\n" not in out
    assert ": " not in out and ", " not in out
    json.loads(out)


def test_exact_bytes_of_a_claude_answer() -> None:
    """A Claude Code SessionStart answer is byte-for-byte the documented shape."""
    assert answer("claude", "SessionStart", "hi") == (
        '{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"hi"}}'
    )


def test_codex_stop_never_has_hook_specific_output() -> None:
    """Codex's Stop schema has no hookSpecificOutput; we never send one, text or not."""
    for text in (None, "", TEXT, LONG):
        assert "hookSpecificOutput" not in json.loads(answer("codex", "Stop", text))


@pytest.mark.parametrize(
    ("client", "event"),
    [("claude", "Stop"), ("codex", "Stop"), ("qwen", "Stop"), ("gemini", "AfterAgent"),
     ("cursor", "stop"), ("kimi", "Stop"), ("hermes", "on_session_end")],
)  # fmt: skip
def test_turn_end_never_carries_text(client: str, event: str) -> None:
    """Text at a turn's end would restart the turn (Claude looped 9 times), so it is refused."""
    dialect = dialect_for(client)
    parsed = dialect.parse(event, payload_for(client, event))
    assert not dialect.can_carry_text(parsed)
    assert answer(client, event, TEXT) == "{}"


def test_goose_stop_blocks_with_the_text_as_reason() -> None:
    """Goose hears a notice by refusing to end the turn, with the notice as the reason."""
    assert answer("goose", "Stop", "two waiting") == '{"decision":"block","reason":"two waiting"}'


def test_goose_answers_allow_when_there_is_nothing_to_say() -> None:
    """An object without a decision counts as a failed hook in Goose, so empty is allow."""
    for event in ("Stop", "SessionStart", "UserPromptSubmit", "PostToolUse"):
        assert answer("goose", event, None) == '{"decision":"allow"}'


def test_goose_explicit_allow_overrides_text() -> None:
    """decision=ALLOW lets a Goose turn end even when text was offered."""
    goose = dialect_for("goose")
    stop = goose.parse(None, '{"event": "Stop"}')
    assert goose.render(stop, "x", decision=Decision.ALLOW) == '{"decision":"allow"}'
    assert goose.render(stop, "x", decision=Decision.BLOCK) == '{"decision":"block","reason":"x"}'


def test_block_needs_a_reason() -> None:
    """A Goose block with no text is refused rather than sent with an empty reason."""
    goose = dialect_for("goose")
    with pytest.raises(LocalProtocolError):
        goose.render(goose.parse(None, '{"event": "Stop"}'), None, decision=Decision.BLOCK)


def test_block_is_refused_where_the_answer_has_no_decision() -> None:
    """Only Goose's Stop takes a decision; asking Claude Code to block is our bug."""
    claude = dialect_for("claude")
    stop = claude.parse("Stop", "{}")
    with pytest.raises(LocalProtocolError):
        claude.render(stop, "x", decision=Decision.BLOCK)
    start = claude.parse("SessionStart", "{}")
    assert claude.render(start, "x", decision=Decision.ALLOW) == answer(
        "claude", "SessionStart", "x"
    )
