"""Kimi Code's hook dialect.

Theory of operation
-------------------
Kimi Code's payload is Claude Code's (``{hook_event_name, session_id, cwd, ...}``, snake_case,
plus ``session_title``, which we take as the session's name), so it cannot be told apart by
content: the installed command says ``--client kimi``. Only UserPromptSubmit, PreToolUse and
Stop are blocking events whose answers Kimi reads; every other event is observation only.
Text therefore rides on **UserPromptSubmit only**, as ``{"message": T}``, which Kimi appends to
the context (wrapped in a ``<hook_result>`` tag, per the reference). Stop never carries text: a
message there keeps the turn going. Nothing to say is ``{}``.

Edits: ``Write`` and ``Edit``, with the file in ``tool_input.path`` (the reference, from Kimi's
tool sources). PreToolUse is registered for them alone, with Kimi's ``matcher`` key (a pattern
on the tool name, in Kimi's documented example a regular expression); PostToolUse, already
registered, reports what they wrote. A PreToolUse answer reaches the model only as a block:
``hookSpecificOutput.permissionDecision: "deny"`` with ``permissionDecisionReason`` becomes a
failed tool result. No documented channel carries a warning while allowing, and none asks a
person, so **allow answers {}** (the warning waits for the next prompt) and **ask is answered
as deny**, the safer of the two (see ``crosstalk.core.dialects.codex``).

Config: ``[[hooks]]`` tables in ``~/.kimi-code/config.toml`` with the keys ``event``,
``matcher`` (PreToolUse only), ``command`` and ``timeout`` (seconds, 1-600); Kimi refuses the
whole file on an unknown key.
:func:`hook_config` returns them as ``{"hooks": [table, ...]}``; the installer writes TOML.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    Fields,
    command_for,
    spec_table,
    tool_paths,
)
from crosstalk.core.dialects.claude import CLAUDE_KINDS, decision_answer

CLIENT = "kimi"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
CARRIERS = ("UserPromptSubmit",)
WRITING_TOOLS = {"Write": (("tool_input", "path"),), "Edit": (("tool_input", "path"),)}
MATCHERS = {"PreToolUse": "^(Write|Edit)$"}


def _answer(event: str, text: str) -> dict[str, object]:
    return {"message": text}


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing (no channel). Ask and deny: a deny with the reason (see above)."""
    if decision is EditDecision.ALLOW:
        return None, False
    return decision_answer(event, text, "deny"), True


def _table(command: str, event: str) -> dict[str, object]:
    table: dict[str, object] = {"event": event}
    if event in MATCHERS:
        table["matcher"] = MATCHERS[event]
    table["command"] = command_for(command, CLIENT, event)
    table["timeout"] = HOOK_TIMEOUT_S
    return table


def _config(command: str) -> dict[str, object]:
    return {"hooks": [_table(command, event) for event in REGISTERED]}


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(session_name=(("session_title",),)),
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
