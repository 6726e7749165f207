"""Antigravity's (``agy``) hook dialect.

Theory of operation
-------------------
Antigravity sends camelCase protojson, ``{conversationId, workspacePaths: [...],
invocationNum, transcriptPath, modelName}``, and **no event name**: the installed command passes
it as argv (``... PreInvocation``). crosstalk registers PreInvocation only; it fires before
every model call, and the first one of a conversation (``invocationNum`` 0) is the session
start. Text goes in ``{"injectSteps": [{"ephemeralMessage": T}]}``; nothing to say is ``{}``.

The hook runs in the directory holding the plugin's ``hooks.json``, not the project, so the
working directory comes from ``workspacePaths[0]`` only, never from the process.

``hooks.json`` is a map of hook *names*; ours is ``crosstalk``, holding a flat list of handlers
per event. Antigravity's parser is strict: a fractional or string timeout drops the whole file,
so the timeout is a whole number of seconds.
"""

from __future__ import annotations

from collections.abc import Mapping

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EventKind,
    Fields,
    HookEvent,
    command_for,
    lookup,
    spec_table,
)

CLIENT = "agy"
HOOK_NAME = "crosstalk"
REGISTERED = ("PreInvocation",)
KINDS = {
    "PreInvocation": EventKind.PROMPT,
    "PostInvocation": EventKind.OTHER,
    "PreToolUse": EventKind.TOOL_USE,
    "PostToolUse": EventKind.TOOL_USE,
    "SessionStart": EventKind.SESSION_START,
    "Stop": EventKind.STOP,
}
CARRIERS = ("PreInvocation",)


def _first_invocation(event: HookEvent, payload: Mapping[str, object]) -> HookEvent:
    number = lookup(payload, ("invocationNum",))
    if isinstance(number, bool) or not isinstance(number, int):
        return event
    first = number == 0
    if first and event.raw_event == "PreInvocation":
        return event.replace(kind=EventKind.SESSION_START, first_turn=True)
    return event.replace(first_turn=first)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"injectSteps": [{"ephemeralMessage": text}]}


def _config(command: str) -> dict[str, object]:
    handlers = {
        event: [
            {
                "type": "command",
                "command": command_for(command, CLIENT, event),
                "timeout": HOOK_TIMEOUT_S,
            }
        ]
        for event in REGISTERED
    }
    return {HOOK_NAME: handlers}


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        event=(),
        session_id=(("conversationId",),),
        cwd=(("workspacePaths", 0),),
        transcript=(("transcriptPath",),),
        prompt=(),
        stop_hook_active=(),
    ),
    refine=_first_invocation,
)
