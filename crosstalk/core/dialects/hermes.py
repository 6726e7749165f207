"""Hermes Agent's shell-hook dialect.

Theory of operation
-------------------
Hermes runs shell hooks declared under ``hooks:`` in ``~/.hermes/config.yaml`` and sends
``{hook_event_name, tool_name, tool_input, session_id, cwd, profile, extra: {...}}`` with
snake_case event names; event-specific values sit in ``extra`` (``extra.user_message`` on
pre_llm_call, ``extra.is_first_turn`` on the first turn). The event name is also passed as argv.

Only **pre_llm_call** injects text, as ``{"context": T}``, which Hermes adds to the next model
call's user message. on_session_start's answer is ignored by Hermes (observation only), so it
carries nothing; on_session_end fires at the end of every turn and is our ``stop``. Nothing to
say is ``{}`` (Hermes treats it as a no-op).

Edits: ``write_file`` and ``patch``, the file in ``tool_input.path`` (the reference; not
measured). **pre_tool_call** and **post_tool_call** are registered for every tool (no matcher
is documented for shell hooks; the hook program answers other tools at once, without the
daemon). A pre_tool_call answer reaches the model only as ``{"action": "block", "message": T}``,
the tool's error; ``{"action": "approve", "message": T}`` sends the call to Hermes's own
human-approval gate, our ask (whether the person sees the message is not documented, so the
text is also kept for the next prompt); every other answer is ignored, so allow answers ``{}``
and the warning waits for the next pre_llm_call.

Config: ``{event: [{command, timeout}]}`` under ``hooks:``; timeouts are seconds (Hermes caps
them at 300). The user must approve each (event, command) pair once; the installer says so.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    EventKind,
    Fields,
    command_for,
    spec_table,
    tool_paths,
)

CLIENT = "hermes"
REGISTERED = (
    "on_session_start", "pre_llm_call", "pre_tool_call", "post_tool_call", "on_session_end",
)
WRITING_TOOLS = {"write_file": (("tool_input", "path"),), "patch": (("tool_input", "path"),)}
KINDS = {
    "on_session_start": EventKind.SESSION_START,
    "pre_llm_call": EventKind.PROMPT,
    "post_llm_call": EventKind.OTHER,
    "pre_tool_call": EventKind.BEFORE_TOOL,
    "post_tool_call": EventKind.TOOL_USE,
    "on_session_end": EventKind.STOP,
    "on_session_finalize": EventKind.OTHER,
    "on_session_reset": EventKind.OTHER,
    "subagent_start": EventKind.OTHER,
    "subagent_stop": EventKind.OTHER,
    "pre_verify": EventKind.OTHER,
}
CARRIERS = ("pre_llm_call",)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"context": text}


def before_tool(
    event: str, text: str, decision: EditDecision
) -> tuple[dict[str, object] | None, bool]:
    """Allow: nothing (ignored). Ask: Hermes's approval gate. Deny: a block with the text."""
    if decision is EditDecision.ALLOW:
        return None, False
    if decision is EditDecision.ASK:
        return {"action": "approve", "message": text}, False
    return {"action": "block", "message": text}, True


def _config(command: str) -> dict[str, object]:
    hooks = {
        event: [{"command": command_for(command, CLIENT, event), "timeout": HOOK_TIMEOUT_S}]
        for event in REGISTERED
    }
    return {"hooks": hooks}


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        prompt=(("extra", "user_message"), ("prompt",)),
        first_turn=(("extra", "is_first_turn"),),
        stop_hook_active=(),
    ),
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
