"""Goose's hook dialect.

Theory of operation
-------------------
Goose runs hooks from a plugin directory (``~/.agents/plugins/crosstalk/hooks/hooks.json``,
Claude-style layout) and sends ``{event, session_id, ...}``: the event name is in ``event``
(there is no ``hook_event_name``); ``working_dir`` appears on tool events; the submitted prompt
is ``message``.

Only PreToolUse and Stop can block; every other answer is ignored. crosstalk speaks on **Stop**:
``{"decision": "block", "reason": T}`` refuses to end the turn and puts the reason in front of
the model, so a notice is heard between turns. Everything else, and Stop with nothing to say,
answers ``{"decision": "allow"}``: Goose counts an object without a decision as a hook that
returned no decision. Goose caps consecutive Stop blocks; the hook program must block only when
there is something new to say.

Edits: ``developer__write`` and ``developer__edit``, the file in ``tool_input.path`` (the
reference; not measured). **PreToolUse** and **PostToolUse** are registered for every tool (the
Open Plugins matcher's syntax is not documented by Goose; the hook program answers other tools
at once, without the daemon). PreToolUse can only block: ``{"decision": "block", "reason": T}``
puts T in front of the model as the denial. Goose has no ask, so **ask is answered as a
block**; allow is ``{"decision": "allow"}`` and the warning waits for the next Stop.

Timeouts are seconds (Goose's default is 30).
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Decision,
    Dialect,
    EditDecision,
    EventKind,
    Fields,
    claude_style_config,
    spec_table,
    tool_paths,
)

CLIENT = "goose"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
WRITING_TOOLS = {
    "developer__write": (("tool_input", "path"),),
    "developer__edit": (("tool_input", "path"),),
}
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.BEFORE_TOOL,
    "PreToolUseResult": EventKind.TOOL_USE,
    "PostToolUse": EventKind.TOOL_USE,
    "PostToolUseFailure": EventKind.TOOL_USE,
    "BeforeReadFile": EventKind.BEFORE_TOOL,
    "AfterFileEdit": EventKind.TOOL_USE,
    "BeforeShellExecution": EventKind.BEFORE_TOOL,
    "AfterShellExecution": EventKind.TOOL_USE,
    "Stop": EventKind.STOP,
    "SessionEnd": EventKind.OTHER,
}
CARRIERS = ("Stop",)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"decision": Decision.BLOCK.value, "reason": text}


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: ``{"decision": "allow"}`` (no text). Ask and deny: a block with the text."""
    if decision is EditDecision.ALLOW:
        return None, False
    return {"decision": Decision.BLOCK.value, "reason": text}, True


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, HOOK_TIMEOUT_S)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        event=(("event",),),
        cwd=(("working_dir",), ("cwd",)),
        prompt=(("message",), ("prompt",)),
        transcript=(),
        stop_hook_active=(),
    ),
    empty={"decision": Decision.ALLOW.value},
    decisions=frozenset({"Stop"}),
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
