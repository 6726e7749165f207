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
- Entries in ``hooks.json`` carry no timeout: the reference writes none, and Cursor's default
  applies.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import Dialect, EventKind, Fields, command_for, spec_table

CLIENT = "cursor"
CONTEXT_LIMIT = 10_000
REGISTERED = ("sessionStart", "beforeSubmitPrompt", "postToolUse", "stop")
KINDS = {
    "sessionStart": EventKind.SESSION_START,
    "beforeSubmitPrompt": EventKind.PROMPT,
    "preToolUse": EventKind.TOOL_USE,
    "postToolUse": EventKind.TOOL_USE,
    "postToolUseFailure": EventKind.TOOL_USE,
    "beforeShellExecution": EventKind.TOOL_USE,
    "afterShellExecution": EventKind.TOOL_USE,
    "beforeMCPExecution": EventKind.TOOL_USE,
    "afterMCPExecution": EventKind.TOOL_USE,
    "beforeReadFile": EventKind.TOOL_USE,
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


def _config(command: str) -> dict[str, object]:
    hooks = {
        event: [{"type": "command", "command": command_for(command, CLIENT, event)}]
        for event in REGISTERED
    }
    return {"version": 1, "hooks": hooks}


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
)
