"""Reading each client's stdin: real payload shapes in, normalised HookEvent out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.core.dialects import (
    CLIENTS,
    EventKind,
    HookEvent,
    detect_client,
    dialect_for,
    hook_config,
)
from crosstalk.errors import LocalProtocolError

GOLDEN = Path(__file__).parent / "golden"


def parse(client: str, argv: str | None, payload: object) -> HookEvent:
    return dialect_for(client).parse(argv, json.dumps(payload))


def test_claude_user_prompt_submit_fields() -> None:
    """Claude Code's UserPromptSubmit gives session, cwd, transcript and prompt."""
    event = parse(
        "claude",
        None,
        {
            "session_id": "abc",
            "transcript_path": "/t.jsonl",
            "cwd": "/repo",
            "hook_event_name": "UserPromptSubmit",
            "prompt": "fix it",
            "permission_mode": "default",
        },
    )
    assert event == HookEvent(
        client="claude",
        kind=EventKind.PROMPT,
        raw_event="UserPromptSubmit",
        session_id="abc",
        cwd="/repo",
        transcript_path="/t.jsonl",
        prompt="fix it",
    )


def test_claude_stop_hook_active_is_read() -> None:
    """A re-run Stop hook is flagged, so the hook program can stay quiet."""
    event = parse("claude", None, {"hook_event_name": "Stop", "stop_hook_active": True})
    assert event.kind is EventKind.STOP and event.stop_hook_active


def test_codex_falls_back_to_thread_id() -> None:
    """Codex may identify the session only by thread_id, and names it by thread_name."""
    event = parse(
        "codex",
        None,
        {"hook_event_name": "SessionStart", "thread_id": "th-1", "thread_name": "api"},
    )
    assert (event.session_id, event.session_name, event.kind) == (
        "th-1",
        "api",
        EventKind.SESSION_START,
    )


def test_kimi_session_title_is_the_session_name() -> None:
    """Kimi Code's session_title names the session."""
    event = parse("kimi", "Stop", {"hook_event_name": "Stop", "session_title": "Fix login"})
    assert (event.session_name, event.kind) == ("Fix login", EventKind.STOP)


def test_gemini_before_agent_is_the_prompt() -> None:
    """Gemini CLI's BeforeAgent is its prompt-submit event; AfterAgent ends the turn."""
    event = parse("gemini", None, {"hook_event_name": "BeforeAgent", "prompt": "hello"})
    assert event.kind is EventKind.PROMPT and event.prompt == "hello"
    assert parse("gemini", None, {"hook_event_name": "AfterAgent"}).kind is EventKind.STOP


def test_cursor_reads_conversation_and_workspace_root() -> None:
    """Cursor: conversation_id stands in for the session, workspace_roots[0] for cwd."""
    event = parse(
        "cursor",
        None,
        {
            "hook_event_name": "sessionStart",
            "conversation_id": "conv-1",
            "cursor_version": "2.1.0",
            "workspace_roots": ["/w/one", "/w/two"],
        },
    )
    assert (event.kind, event.session_id, event.cwd) == (
        EventKind.SESSION_START,
        "conv-1",
        "/w/one",
    )


def test_agy_takes_the_event_from_argv_and_marks_the_first_invocation() -> None:
    """Antigravity sends no event name; invocation 0 is the session start."""
    first = parse(
        "agy",
        "PreInvocation",
        {
            "conversationId": "cv",
            "workspacePaths": ["/proj"],
            "invocationNum": 0,
            "transcriptPath": "/t",
        },
    )
    assert (first.kind, first.first_turn, first.session_id, first.cwd, first.transcript_path) == (
        EventKind.SESSION_START,
        True,
        "cv",
        "/proj",
        "/t",
    )
    later = parse("agy", "PreInvocation", {"conversationId": "cv", "invocationNum": 4})
    assert (later.kind, later.first_turn) == (EventKind.PROMPT, False)
    assert dialect_for("agy").can_carry_text(first) and dialect_for("agy").can_carry_text(later)


def test_hermes_reads_extra() -> None:
    """Hermes keeps the user's message and the first-turn flag under extra."""
    event = parse(
        "hermes",
        "pre_llm_call",
        {
            "hook_event_name": "pre_llm_call",
            "session_id": "h1",
            "cwd": "/p",
            "tool_name": None,
            "extra": {"user_message": "go", "is_first_turn": True},
        },
    )
    assert (event.kind, event.prompt, event.first_turn) == (EventKind.PROMPT, "go", True)


def test_goose_uses_event_and_working_dir() -> None:
    """Goose names the event in `event` and the directory in `working_dir`."""
    event = parse(
        "goose",
        None,
        {"event": "UserPromptSubmit", "session_id": "g", "message": "hi", "working_dir": "/w"},
    )
    assert (event.kind, event.session_id, event.prompt, event.cwd) == (
        EventKind.PROMPT,
        "g",
        "hi",
        "/w",
    )


def test_payload_event_name_wins_over_argv() -> None:
    """The payload says what fired; argv is only a fallback."""
    event = parse("claude", "SessionStart", {"hook_event_name": "Stop"})
    assert event.raw_event == "Stop" and event.kind is EventKind.STOP


def test_argv_event_is_used_when_the_payload_has_none() -> None:
    """With no event in the payload, the argv name decides."""
    assert parse("claude", "PostToolUse", {}).kind is EventKind.TOOL_USE


def test_fields_of_the_wrong_type_are_ignored() -> None:
    """Numbers, lists and nulls where strings belong leave the field missing."""
    event = parse(
        "claude",
        None,
        {
            "hook_event_name": 7,
            "session_id": 12,
            "cwd": ["/x"],
            "transcript_path": None,
            "prompt": {"a": 1},
            "stop_hook_active": "yes",
        },
    )
    assert event == HookEvent(client="claude", kind=EventKind.OTHER)


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '"text"', "null", "{", "[" * 100_000])
def test_garbage_stdin_is_an_other_event(client: str, stdin: str) -> None:
    """Stdin that is not a JSON object yields an OTHER event with no fields, never an error."""
    event = dialect_for(client).parse(None, stdin)
    assert event == HookEvent(client=client, kind=EventKind.OTHER)


def test_unknown_event_names_are_other_and_carry_nothing() -> None:
    """An event crosstalk does not know is OTHER and cannot carry text."""
    claude = dialect_for("claude")
    event = claude.parse("SomethingNew", "{}")
    assert event.kind is EventKind.OTHER and event.raw_event == "SomethingNew"
    assert not claude.can_carry_text(event)
    assert claude.render(event, "text") == "{}"


@pytest.mark.parametrize(
    ("name", "client"),
    [("claude", "claude"), ("Claude-Code", "claude"), ("antigravity", "agy"),
     ("gemini-cli", "gemini"), ("qwen-code", "qwen"), ("kimi-code", "kimi"),
     ("cursor-agent", "cursor"), ("GOOSE", "goose")],
)  # fmt: skip
def test_dialect_for_accepts_names_and_aliases(name: str, client: str) -> None:
    """Client names are case-insensitive and common long names work."""
    assert dialect_for(name).client == client


def test_dialect_for_an_unknown_client_raises() -> None:
    """An unknown client is our bug, reported with the list of known ones."""
    with pytest.raises(LocalProtocolError, match="claude, codex"):
        dialect_for("emacs")


@pytest.mark.parametrize(
    ("argv", "payload", "client"),
    [
        ("PreInvocation", {"conversationId": "c", "workspacePaths": ["/p"]}, "agy"),
        ("pre_llm_call", {"session_id": "s"}, "hermes"),
        (None, {"hook_event_name": "on_session_start", "session_id": "s"}, "hermes"),
        (None, {"event": "Stop", "session_id": "s"}, "goose"),
        (None, {"hook_event_name": "stop", "cursor_version": "2.0"}, "cursor"),
        (None, {"hook_event_name": "stop", "workspace_roots": []}, "cursor"),
        (None, {"hook_event_name": "BeforeAgent", "session_id": "s"}, "gemini"),
        (None, {"hook_event_name": "SessionStart", "session_id": "s"}, "claude"),
        ("Stop", {}, "claude"),
    ],
)
def test_detect_client_follows_the_payload(
    argv: str | None, payload: dict[str, object], client: str
) -> None:
    """Without --client, the payload's shape names the client; Claude Code is the default."""
    assert detect_client(argv, json.dumps(payload)) == client


def test_detect_client_on_garbage_is_claude() -> None:
    """Garbage is answered in the most common dialect rather than failing."""
    assert detect_client(None, "\x00garbage") == "claude"


@pytest.mark.parametrize("client", CLIENTS)
def test_hook_config_matches_golden(client: str) -> None:
    """Each client's hook entries are exactly the reviewed golden file."""
    expected = json.loads((GOLDEN / f"hook_config_{client}.json").read_text())
    assert hook_config(client, "/opt/bin/crosstalk-hook") == expected


@pytest.mark.parametrize(
    ("client", "timeout"),
    [("claude", 20), ("codex", 20), ("qwen", 20_000), ("gemini", 20_000), ("goose", 20)],
)
def test_timeouts_are_in_the_clients_unit(client: str, timeout: int) -> None:
    """Qwen Code and Gemini CLI count milliseconds (measured); the others seconds."""
    config = hook_config(client, "h")
    hooks = config["hooks"]
    assert isinstance(hooks, dict)
    for groups in hooks.values():
        assert groups[0]["hooks"][0]["timeout"] == timeout


@pytest.mark.parametrize("client", CLIENTS)
def test_registered_commands_name_client_and_event(client: str) -> None:
    """Every installed command passes --client and the event, so detection is never needed."""
    text = json.dumps(hook_config(client, "crosstalk-hook"))
    for event in dialect_for(client).registered:
        assert f'"crosstalk-hook --client {client} {event}"' in text
