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

Timeouts are in **milliseconds** (measured; Gemini's default is 60000). Hooks run only in a
trusted workspace.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EventKind,
    claude_style_config,
    spec_table,
)
from crosstalk.core.dialects.claude import additional_context

CLIENT = "gemini"
REGISTERED = ("SessionStart", "BeforeAgent", "AfterTool", "AfterAgent")
TIMEOUT_MS = HOOK_TIMEOUT_S * 1000
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "BeforeAgent": EventKind.PROMPT,
    "BeforeTool": EventKind.TOOL_USE,
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


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, TIMEOUT_MS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
)
