"""Qwen Code's hook dialect.

Theory of operation
-------------------
Qwen Code takes Claude Code's contract: the same event names, payload and
``hookSpecificOutput.{hookEventName, additionalContext}`` answer on SessionStart,
UserPromptSubmit and PostToolUse, ``{}`` otherwise, and Stop never carries text.

Measured on 0.15.10 (``-p`` mode): UserPromptSubmit context is appended as an extra text part of
the user message, and **SessionStart did not fire**, so nothing may depend on it; the hook
program hands the working set over on the first event that can carry text, whichever it is.
The reference says Qwen HTML-escapes tags in hidden session-start context; our text is already
entity-escaped where a sender controls it, so that changes nothing.

Edits: ``write_file`` and ``edit`` (``replace`` is its legacy name), with the file in
``tool_input.file_path`` (0.15.10 also unescapes ``path``, so that is read too). PreToolUse is
registered for them alone (the matcher is a regular expression tested against the tool name,
read in 0.15.10). That version parses a PreToolUse ``additionalContext`` but only logs it, so
**allow answers {}** and the warning waits for the next text-carrying event (usually the same
tool's PostToolUse). ``permissionDecision: "ask"`` and ``"deny"`` both stop the tool there with
``permissionDecisionReason`` as the error the model reads; we send each as itself, since Qwen
documents both.

Timeouts are in **milliseconds** (measured), unlike Claude Code's seconds.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    Path,
    claude_style_config,
    spec_table,
    tool_paths,
)
from crosstalk.core.dialects.claude import (
    CARRIERS,
    CLAUDE_KINDS,
    additional_context,
    decision_answer,
)

CLIENT = "qwen"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
TIMEOUT_MS = HOOK_TIMEOUT_S * 1000
_PATHS: tuple[Path, ...] = (("tool_input", "file_path"), ("tool_input", "path"))
WRITING_TOOLS = {"write_file": _PATHS, "edit": _PATHS, "replace": _PATHS}
MATCHERS = {"PreToolUse": "^(write_file|edit|replace)$"}


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing (the context is not shown). Ask and deny: the decision and its reason."""
    if decision is EditDecision.ALLOW:
        return None, False
    return decision_answer(event, text, decision.value), True


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, TIMEOUT_MS, MATCHERS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
