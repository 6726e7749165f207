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

Edits (third-party reports only; no vendor documentation was found): **PreToolUse** is
registered, with the same handler keys as PreInvocation (a matcher key is not known to be
accepted, and an unknown key may drop the whole file), and sends ``toolCall: {name, args}``.
The file-writing tools are ``write_to_file``, ``edit_file``, ``replace_file_content`` and
``multi_replace_file_content``, whose args use PascalCase keys; the file is read from the
first of :data:`PATH_KEYS` present (also from ``args`` given as a JSON string). PostToolUse
reportedly omits the tool, so it is not registered: Antigravity sessions report the files
they are about to edit, not the ones they edited. Only a refusal is reported to be enforced,
``{"decision": "deny", "reason": T}``, and whether the model reads the reason is unknown; so
allow answers ``{}``, **ask is answered as deny**, and the text also waits for the next
PreInvocation.

``hooks.json`` is a map of hook *names*; ours is ``crosstalk``, holding a flat list of handlers
per event. Antigravity's parser is strict: a fractional or string timeout drops the whole file,
so the timeout is a whole number of seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    EventKind,
    Fields,
    HookEvent,
    command_for,
    lookup,
    spec_table,
)

CLIENT = "agy"
HOOK_NAME = "crosstalk"
REGISTERED = ("PreInvocation", "PreToolUse")
WRITING_TOOLS = frozenset(
    {"write_to_file", "edit_file", "replace_file_content", "multi_replace_file_content"}
)
#: Where the args may name the file, most likely first (reports disagree on the key).
PATH_KEYS = (
    "TargetFile", "AbsolutePath", "FilePath", "Path", "targetFile", "absolutePath", "filePath",
    "file_path", "path",
)
KINDS = {
    "PreInvocation": EventKind.PROMPT,
    "PostInvocation": EventKind.OTHER,
    "PreToolUse": EventKind.BEFORE_TOOL,
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


def tool_edits(tool: str | None, payload: Mapping[str, object]) -> Iterable[object]:
    """The file a writing tool's args name (the first of :data:`PATH_KEYS` present)."""
    if tool not in WRITING_TOOLS:
        return ()
    args = lookup(payload, ("toolCall", "args"))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return ()
    if not isinstance(args, dict):
        return ()
    for key in PATH_KEYS:
        if isinstance(args.get(key), str) and args[key]:
            return (args[key],)
    return ()


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing. Ask and deny: a deny with the text (not known to reach the model)."""
    if decision is EditDecision.ALLOW:
        return None, False
    return {"decision": "deny", "reason": text}, False


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
        tool_name=(("toolCall", "name"),),
    ),
    refine=_first_invocation,
    edits=tool_edits,
    before_tool=before_tool,
)
