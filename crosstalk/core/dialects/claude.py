"""Claude Code's hook dialect.

Theory of operation
-------------------
Claude Code sends ``{session_id, transcript_path, cwd, hook_event_name, ...}`` on stdin
(UserPromptSubmit adds ``prompt``; Stop adds ``stop_hook_active``). Text reaches the model
through ``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": T}}`` on
SessionStart, UserPromptSubmit and PostToolUse; measured on 2.1.197 and 2.1.332, the context
lands in a ``role: "system"`` message of the next model request. Nothing to say is ``{}``.

Decisions recorded here:

- **Stop never carries text.** Measured: a Stop hook that prints ``additionalContext`` makes
  Claude Code continue the turn, and it looped nine times before stopping. The reference's
  ``{"continue": true}`` empty answer is equivalent to ``{}``; we print ``{}``, the smaller
  valid answer.
- **PreToolUse does not carry text.** The reference lists it, but crosstalk never registers it,
  and older Claude Code versions accept no ``additionalContext`` there.
- Timeouts are in seconds.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EventKind,
    claude_style_config,
    spec_table,
)

CLIENT = "claude"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")

#: Event names shared by Claude Code, Codex, Qwen Code and Kimi Code.
CLAUDE_KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.TOOL_USE,
    "PostToolUse": EventKind.TOOL_USE,
    "PostToolUseFailure": EventKind.TOOL_USE,
    "Stop": EventKind.STOP,
    "SubagentStop": EventKind.OTHER,
    "Notification": EventKind.OTHER,
    "PreCompact": EventKind.OTHER,
    "SessionEnd": EventKind.OTHER,
}
CARRIERS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def additional_context(event: str, text: str) -> dict[str, object]:
    """The Claude-style answer carrying ``text``: ``hookSpecificOutput`` with two keys only."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, HOOK_TIMEOUT_S)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
)
