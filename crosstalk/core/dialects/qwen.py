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

Timeouts are in **milliseconds** (measured), unlike Claude Code's seconds.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    claude_style_config,
    spec_table,
)
from crosstalk.core.dialects.claude import CARRIERS, CLAUDE_KINDS, additional_context

CLIENT = "qwen"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
TIMEOUT_MS = HOOK_TIMEOUT_S * 1000


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, TIMEOUT_MS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
)
