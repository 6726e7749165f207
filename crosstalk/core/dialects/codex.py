"""Codex's hook dialect.

Theory of operation
-------------------
Codex reads the same snake_case payload as Claude Code (``session_id, turn_id, transcript_path,
cwd, hook_event_name, model, permission_mode, prompt|source``) and may add ``thread_id``, which
we take as the session id when ``session_id`` is missing, and ``thread_name``, the session's
name. Measured on 0.171.0 (with ``--dangerously-bypass-hook-trust``): ``additionalContext``
from SessionStart and UserPromptSubmit arrives as ``role: "developer"`` messages.

Codex parses answers with ``deny_unknown_fields`` (its published output schemas set
``additionalProperties: false``), so one stray key makes it reject the whole answer. We write
only ``hookSpecificOutput.{hookEventName, additionalContext}`` on SessionStart,
UserPromptSubmit and PostToolUse, and ``{}`` otherwise. **Stop never carries
``hookSpecificOutput``**: its schema has no such key.

Hooks are skipped silently until the user trusts them (``/hooks``); that is the installer's and
``doctor``'s business. Timeouts are in seconds.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EventKind,
    Fields,
    claude_style_config,
    spec_table,
)
from crosstalk.core.dialects.claude import additional_context

CLIENT = "codex"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.TOOL_USE,
    "PostToolUse": EventKind.TOOL_USE,
    "PermissionRequest": EventKind.OTHER,
    "Stop": EventKind.STOP,
}
CARRIERS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, HOOK_TIMEOUT_S)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        session_id=(("session_id",), ("thread_id",)),
        session_name=(("thread_name",),),
    ),
)
