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

Timeouts are seconds (Goose's default is 30).
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Decision,
    Dialect,
    EventKind,
    Fields,
    claude_style_config,
    spec_table,
)

CLIENT = "goose"
REGISTERED = ("SessionStart", "UserPromptSubmit", "Stop")
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.TOOL_USE,
    "PreToolUseResult": EventKind.TOOL_USE,
    "PostToolUse": EventKind.TOOL_USE,
    "PostToolUseFailure": EventKind.TOOL_USE,
    "BeforeReadFile": EventKind.TOOL_USE,
    "AfterFileEdit": EventKind.TOOL_USE,
    "BeforeShellExecution": EventKind.TOOL_USE,
    "AfterShellExecution": EventKind.TOOL_USE,
    "Stop": EventKind.STOP,
    "SessionEnd": EventKind.OTHER,
}
CARRIERS = ("Stop",)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"decision": Decision.BLOCK.value, "reason": text}


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
)
