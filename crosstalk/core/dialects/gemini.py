"""Gemini CLI's hook dialect.

Theory of operation
-------------------
Gemini CLI sends ``{session_id, transcript_path, cwd, hook_event_name, timestamp, ...}``. Its
prompt-submit event is **BeforeAgent** (with ``prompt``); AfterAgent ends a turn (with
``stop_hook_active``); BeforeTool/AfterTool wrap tool calls. Text goes in
``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": T}}`` on SessionStart,
BeforeAgent and AfterTool (Gemini's reference documents ``additionalContext`` on those three).
Measured on 0.61.0: SessionStart's context is prepended to the prompt and BeforeAgent's arrives as
its own ``<hook_context>`` part. AfterAgent never carries text: a ``deny`` there forces a retry
turn, the same loop Claude Code's Stop has. Nothing to say is ``{}``; Gemini wants stdout to
hold nothing but one JSON object.

Edits: ``write_file`` and ``replace`` (Gemini's edit tool; both ``tool_input.file_path``, and
the only file-writing tools in 0.61.0's bundle). **BeforeTool** is registered for them alone
(the matcher is a regular expression, tested against the tool name, read in 0.61.0); AfterTool
reports what they wrote. BeforeTool has no channel to the model but a refusal: 0.61.0 reads
``decision`` (``deny``/``block`` stop the tool with ``reason`` sent to the model as the tool's
error; ``ask`` makes the user confirm, showing ``systemMessage`` to the user only) and
``hookSpecificOutput.tool_input``, and no ``additionalContext``. So allow answers ``{}`` and the
warning waits for the next text-carrying event, which is usually that tool's own AfterTool.

Timeouts are in **milliseconds** (measured; Gemini's default is 60000). Hooks run only in a
trusted workspace.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    EventKind,
    claude_style_config,
    spec_table,
    tool_paths,
)
from crosstalk.core.dialects.claude import additional_context

CLIENT = "gemini"
REGISTERED = ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "AfterAgent")
WRITING_TOOLS = {
    "write_file": (("tool_input", "file_path"),),
    "replace": (("tool_input", "file_path"),),
}
MATCHERS = {"BeforeTool": "^(write_file|replace)$"}
TIMEOUT_MS = HOOK_TIMEOUT_S * 1000
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "BeforeAgent": EventKind.PROMPT,
    "BeforeTool": EventKind.BEFORE_TOOL,
    "AfterTool": EventKind.TOOL_USE,
    "AfterAgent": EventKind.STOP,
    "SessionEnd": EventKind.OTHER,
    "BeforeModel": EventKind.OTHER,
    "AfterModel": EventKind.OTHER,
    "BeforeToolSelection": EventKind.OTHER,
    "PreCompress": EventKind.OTHER,
    "Notification": EventKind.OTHER,
}
CARRIERS = ("SessionStart", "BeforeAgent", "AfterTool")


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing (no channel). Ask: the user confirms, reading the text. Deny: the text
    is the tool's error, which the model reads."""
    if decision is EditDecision.ALLOW:
        return None, False
    if decision is EditDecision.ASK:
        return {"decision": "ask", "systemMessage": text}, False
    return {"decision": "deny", "reason": text}, True


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, TIMEOUT_MS, MATCHERS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
