"""The hook program and edits: which paths it reports, and the warning before an edit.

In-process runs of :func:`crosstalk.hook.main.run` against the fake daemon (a real unix socket
answering from a table), as in ``test_hook_program``; ``edits_touched`` and ``edits_check`` are
answered the way the daemon delegates them from ``hook_event``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.hook import pending
from crosstalk.hook.main import run
from crosstalk.paths import Home
from tests.hook.fake_daemon import FakeDaemon, Reply
from tests.hook.test_hook_program import WS, default_replies, home  # noqa: F401 (a fixture)

WARNING = "ana (api session) is editing src/app.py right now."
PATCH = "*** Begin Patch\n*** Update File: src/app.py\n@@\n-a\n+b\n*** End Patch\n"


def tool_payload(
    client: str, event: str, tool: str, tool_input: object, session: str = "sess-1"
) -> str:
    """A tool event as ``client`` sends it (Goose names the event in ``event``)."""
    key = "event" if client == "goose" else "hook_event_name"
    return json.dumps({key: event, "session_id": session, "cwd": "/srv/repo",
                       "tool_name": tool, "tool_input": tool_input})


def hook(client: str, event: str, stdin: str) -> tuple[str, int]:
    return run(["--client", client, event], time.monotonic(), stdin)


def replies_with(warning: dict[str, Any] | None, **more: Reply) -> dict[str, Reply]:
    replies = default_replies()
    replies["edits_touched"] = lambda r: {}
    replies["edits_check"] = lambda r: warning or {}
    replies.update(more)
    return replies


@pytest.fixture
def daemon(home: Home) -> Iterator[FakeDaemon]:  # noqa: F811 (home is the imported fixture)
    fake = FakeDaemon(home.socket, replies_with({"text": WARNING, "decision": "allow"}))
    yield fake
    fake.close()


def sent_hook_events(fake: FakeDaemon) -> list[dict[str, Any]]:
    return [line for line in fake.lines if line["op"] == "hook_event"]


def test_a_post_tool_edit_sends_edited_paths_with_the_cwd(daemon: FakeDaemon) -> None:
    """After an Edit, the one hook_event line carries ``edited`` and ``cwd``, not ``editing``."""
    out, status = hook("claude", "PostToolUse", tool_payload(
        "claude", "PostToolUse", "Edit", {"file_path": "src/app.py", "old_string": "a"}))
    assert status == 0
    (line,) = sent_hook_events(daemon)
    assert (line["edited"], line["cwd"]) == (["src/app.py"], "/srv/repo")
    assert "editing" not in line
    touched = [r for r in daemon.requests if r["op"] == "edits_touched"]
    assert [(r["session"], r["paths"]) for r in touched] == [("sess-1", ["src/app.py"])]
    assert WS in out  # the post-tool event still carries the working set as before


def test_a_pre_tool_edit_sends_editing_and_shows_claude_the_warning(daemon: FakeDaemon) -> None:
    """Before an Edit, ``editing`` is sent, and the allow warning is Claude's additionalContext."""
    out, status = hook("claude", "PreToolUse", tool_payload(
        "claude", "PreToolUse", "Edit", {"file_path": "/srv/repo/src/app.py"}))
    assert status == 0
    assert out == json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "additionalContext": WARNING}},
        separators=(",", ":"),
    )
    (line,) = sent_hook_events(daemon)
    assert (line["editing"], line["cwd"]) == (["/srv/repo/src/app.py"], "/srv/repo")
    assert "edited" not in line and "notices" not in line and "working_set" not in line


def test_a_deny_before_a_codex_patch_is_codex_deny_with_the_reason(home: Home) -> None:  # noqa: F811
    """A refusal from the daemon is Codex's deny, with the reason the model will read."""
    fake = FakeDaemon(home.socket, replies_with({"text": WARNING, "decision": "deny"}))
    try:
        out, _ = hook("codex", "PreToolUse", tool_payload(
            "codex", "PreToolUse", "apply_patch", {"command": PATCH}))
        (line,) = sent_hook_events(fake)
    finally:
        fake.close()
    assert line["editing"] == ["src/app.py"]
    assert json.loads(out) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "deny",
        "permissionDecisionReason": WARNING,
    }}  # fmt: skip


def test_a_pre_tool_event_of_another_tool_asks_the_daemon_nothing(daemon: FakeDaemon) -> None:
    """A Read (or any tool that writes nothing) is answered at once with the empty answer."""
    out, status = hook("goose", "PreToolUse", tool_payload(
        "goose", "PreToolUse", "developer__shell", {"command": "ls"}))
    assert (out, status) == ('{"decision":"allow"}', 0)
    assert daemon.lines == []


@pytest.mark.parametrize(
    ("client", "event"),
    [("claude", "SessionStart"), ("claude", "UserPromptSubmit"), ("claude", "Stop"),
     ("claude", "PostToolUse"), ("codex", "PostToolUse")],
)  # fmt: skip
def test_events_without_edits_never_send_the_edit_keys(
    client: str, event: str, daemon: FakeDaemon
) -> None:
    """An older daemon refuses unknown keys, so they go only with paths."""
    hook(client, event, tool_payload(client, event, "Bash", {"command": "ls"}))
    (line,) = sent_hook_events(daemon)
    assert not {"edited", "editing"} & set(line)


def test_a_stalled_daemon_lets_the_edit_run_within_the_budget(home: Home) -> None:  # noqa: F811
    """A daemon that accepts and never answers: the allowing empty answer, within a second."""
    fake = FakeDaemon(home.socket, {}, stall=True)
    try:
        started = time.monotonic()
        out, status = hook("claude", "PreToolUse", tool_payload(
            "claude", "PreToolUse", "Write", {"file_path": "/srv/repo/a.py"}))
        elapsed = time.monotonic() - started
    finally:
        fake.close()
    assert (out, status) == ("{}", 0)
    assert elapsed < 1.0


def test_a_daemon_that_is_down_lets_the_edit_run(home: Home) -> None:  # noqa: F811
    """No daemon listening: the empty answer, status 0. (A hook tried to start one a moment
    ago, as its stamp file says, so this one starts none.)"""
    (home.root / "hook-started-daemon").touch()
    out, status = hook("gemini", "BeforeTool", tool_payload(
        "gemini", "BeforeTool", "write_file", {"file_path": "/srv/repo/a.py"}))
    assert (out, status) == ("{}", 0)


def test_an_unknown_decision_allows_the_edit(home: Home) -> None:  # noqa: F811
    """A decision this hook does not know is allow, with the text still a warning."""
    fake = FakeDaemon(home.socket, replies_with({"text": WARNING, "decision": "veto"}))
    try:
        out, _ = hook("claude", "PreToolUse", tool_payload(
            "claude", "PreToolUse", "Edit", {"file_path": "a.py"}))
    finally:
        fake.close()
    assert json.loads(out)["hookSpecificOutput"] == {
        "hookEventName": "PreToolUse", "additionalContext": WARNING,
    }


def test_a_warning_gemini_cannot_show_before_the_edit_comes_with_the_next_text_event(
    daemon: FakeDaemon,
) -> None:
    """Gemini's BeforeTool has no channel to the model: it allows with {}, and the warning
    rides on the next text-carrying event (that tool's AfterTool), exactly once."""
    hook("gemini", "BeforeAgent", tool_payload("gemini", "BeforeAgent", "", {}))  # the set
    before = hook("gemini", "BeforeTool", tool_payload(
        "gemini", "BeforeTool", "replace", {"file_path": "src/app.py"}))
    assert before == ("{}", 0)
    after, _ = hook("gemini", "AfterTool", tool_payload(
        "gemini", "AfterTool", "replace", {"file_path": "src/app.py"}))
    assert json.loads(after) == {"hookSpecificOutput": {
        "hookEventName": "AfterTool", "additionalContext": WARNING,
    }}  # fmt: skip
    again, _ = hook("gemini", "AfterTool", tool_payload(
        "gemini", "AfterTool", "replace", {"file_path": "src/app.py"}))
    assert again == "{}"


def test_a_kept_warning_waits_for_its_own_session(daemon: FakeDaemon) -> None:
    """A warning kept for one session is not shown to another."""
    hook("qwen", "PreToolUse", tool_payload(
        "qwen", "PreToolUse", "edit", {"file_path": "a.py"}, session="one"))
    other, _ = hook("qwen", "UserPromptSubmit", tool_payload(
        "qwen", "UserPromptSubmit", "", {}, session="two"))
    assert WARNING not in other
    mine, _ = hook("qwen", "UserPromptSubmit", tool_payload(
        "qwen", "UserPromptSubmit", "", {}, session="one"))
    assert WARNING in json.loads(mine)["hookSpecificOutput"]["additionalContext"]


def test_an_older_daemon_that_refuses_the_edit_keys_is_asked_again_without_them(
    home: Home,  # noqa: F811
) -> None:
    """A daemon from before edit awareness refuses ``edited`` as malformed; the hook asks again
    without it, so the event still registers and brings its notices."""

    def old(request: dict[str, Any]) -> dict[str, Any]:
        if "edited" in request:
            return {"ok": False, "error": {"code": "protocol_error", "message": "malformed"}}
        return {"session": {"name": request["name"]}, "notices": [], "working_set": WS}

    replies = default_replies()
    replies["hook_event"] = old
    fake = FakeDaemon(home.socket, replies)
    try:
        out, status = hook("claude", "PostToolUse", tool_payload(
            "claude", "PostToolUse", "Write", {"file_path": "a.py"}))
        sent = sent_hook_events(fake)
    finally:
        fake.close()
    assert status == 0 and WS in out
    assert ["edited" in line for line in sent] == [True, False]


def test_kept_warnings_are_taken_once_and_given_back_when_not_shown(tmp_path: Path) -> None:
    """take() empties the session's warnings; settle(shown=False) gives them back, once each."""
    assert pending.keep(tmp_path, "s", "first")
    assert pending.keep(tmp_path, "s", "second")
    assert not pending.keep(tmp_path, "s", "first")  # already waiting
    taken = pending.take(tmp_path, "s")
    assert taken.texts == ["first", "second"]
    assert pending.take(tmp_path, "s").texts == []  # nothing left for a racing event
    pending.settle(tmp_path, "s", taken, shown=False)
    again = pending.take(tmp_path, "s")
    assert again.texts == ["first", "second"]
    pending.settle(tmp_path, "s", again, shown=True)
    assert pending.take(tmp_path, "s").texts == []
    assert list((tmp_path / pending.PENDING_DIR).iterdir()) == []


def test_kept_warnings_stop_growing_at_the_limit(tmp_path: Path) -> None:
    """Past PENDING_LIMIT characters, new warnings are dropped rather than piled up."""
    chunk = "w" * 1000
    kept = [pending.keep(tmp_path, "s", f"{i}{chunk}") for i in range(20)]
    assert kept.count(True) == pending.PENDING_LIMIT // 1001
    assert sum(map(len, pending.take(tmp_path, "s").texts)) <= pending.PENDING_LIMIT
