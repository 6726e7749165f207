"""Cursor's hook dialect (``cursor-agent`` and the editor's agent).

Theory of operation
-------------------
Cursor sends ``{hook_event_name, conversation_id, generation_id, session_id?, cursor_version,
workspace_roots: [...], ...}`` with camelCase event names. Text reaches the model through
``{"additional_context": T}``. Cursor silently drops context longer than
:data:`CONTEXT_LIMIT` characters, so :func:`fit` cuts longer text and ends it with a note that
says how many characters were cut, keeping the whole answer within the limit.

Decisions recorded here (no measurements on the real client yet):

- **beforeSubmitPrompt does not carry text.** The reference lists it, but Cursor documents only
  ``continue``/``user_message`` there, and public hook authors report it cannot inject context.
  Text waits for sessionStart or the next postToolUse instead.
- sessionStart, postToolUse and postToolUseFailure carry ``additional_context``.
- stop never carries text (``followup_message`` would start a new turn).
- The session id is ``session_id``, else ``conversation_id``; the working directory is ``cwd``,
  else the first of ``workspace_roots``.
- Edits (from Cursor's documentation, not measured): **afterFileEdit** (registered) gives the
  file in a top-level ``file_path``; preToolUse/postToolUse name the tool type, ``Write`` or
  ``Delete``, and we read ``tool_input.file_path`` or ``tool_input.path`` when there is one.
  preToolUse is registered twice, once per tool type (``matcher: "Write"`` and
  ``"Delete"``): the documentation lists plain values and does not say whether a matcher is a
  pattern, and one exact value per entry works either way.
- preToolUse has no channel to the model but a refusal: ``permission: "deny"`` with
  ``agent_message`` (to the model) and ``user_message`` (to the person). ``ask`` is "accepted by
  the schema but not enforced for preToolUse", so **ask is answered as deny**; allow answers
  ``{}`` and the warning waits for the next postToolUse or sessionStart.
- Entries in ``hooks.json`` carry no timeout: the reference writes none, and Cursor's default
  applies.
"""

from __future__ import annotations

from collections.abc import Mapping

from crosstalk.core.dialects.base import (
    Dialect,
    EditDecision,
    EventKind,
    Fields,
    HookEvent,
    Path,
    clean_paths,
    command_for,
    spec_table,
    tool_paths,
)

CLIENT = "cursor"
CONTEXT_LIMIT = 10_000
REGISTERED = (
    "sessionStart", "beforeSubmitPrompt", "preToolUse", "postToolUse", "afterFileEdit", "stop",
)
#: The tool types that write files; each gets its own preToolUse entry (see above).
MATCHED = {"preToolUse": ("Write", "Delete")}
_PATHS: tuple[Path, ...] = (("tool_input", "file_path"), ("tool_input", "path"))
WRITING_TOOLS = dict.fromkeys(("Write", "Delete", "Edit", "MultiEdit"), _PATHS)
KINDS = {
    "sessionStart": EventKind.SESSION_START,
    "beforeSubmitPrompt": EventKind.PROMPT,
    "preToolUse": EventKind.BEFORE_TOOL,
    "postToolUse": EventKind.TOOL_USE,
    "postToolUseFailure": EventKind.TOOL_USE,
    "beforeShellExecution": EventKind.BEFORE_TOOL,
    "afterShellExecution": EventKind.TOOL_USE,
    "beforeMCPExecution": EventKind.BEFORE_TOOL,
    "afterMCPExecution": EventKind.TOOL_USE,
    "beforeReadFile": EventKind.BEFORE_TOOL,
    "afterFileEdit": EventKind.TOOL_USE,
    "stop": EventKind.STOP,
    "sessionEnd": EventKind.OTHER,
    "afterAgentResponse": EventKind.OTHER,
    "afterAgentThought": EventKind.OTHER,
}
CARRIERS = ("sessionStart", "postToolUse", "postToolUseFailure")


def trim_note(cut: int) -> str:
    """The line that replaces what :func:`fit` cut."""
    return (
        f"\n[crosstalk cut the last {cut} characters to fit Cursor's {CONTEXT_LIMIT:,}-character"
        " limit; call crosstalk_read and crosstalk_facts to see everything.]"
    )


def fit(text: str, limit: int = CONTEXT_LIMIT) -> str:
    """``text`` if it fits in ``limit`` characters, else its head plus :func:`trim_note`."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    # The note's length depends on the number it states; two passes settle it, the third
    # only confirms (a digit more in the note means a character more cut).
    for _ in range(3):
        cut = len(text) - (limit - len(trim_note(cut)))
    return text[: len(text) - cut] + trim_note(cut)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"additional_context": fit(text)}


def _file_edit(event: HookEvent, payload: Mapping[str, object]) -> HookEvent:
    """afterFileEdit names the file at the top level, and no tool."""
    if event.raw_event != "afterFileEdit":
        return event
    return event.replace(edit_paths=clean_paths([payload.get("file_path")]))


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing (no channel). Ask and deny: a deny, the text to the model and the user."""
    if decision is EditDecision.ALLOW:
        return None, False
    return {"permission": "deny", "agent_message": text, "user_message": text}, True


def _handlers(command: str, event: str) -> list[dict[str, object]]:
    line = command_for(command, CLIENT, event)
    if event not in MATCHED:
        return [{"type": "command", "command": line}]
    return [{"type": "command", "command": line, "matcher": tool} for tool in MATCHED[event]]


def _config(command: str) -> dict[str, object]:
    return {"version": 1, "hooks": {event: _handlers(command, event) for event in REGISTERED}}


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        session_id=(("session_id",), ("conversation_id",)),
        cwd=(("cwd",), ("workspace_roots", 0)),
    ),
    refine=_file_edit,
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
