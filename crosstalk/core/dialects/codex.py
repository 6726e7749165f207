"""Codex's hook dialect.

Theory of operation
-------------------
Codex reads the same snake_case payload as Claude Code (``session_id, turn_id, transcript_path,
cwd, hook_event_name, model, permission_mode, prompt|source``) and may add ``thread_id``, which
we take as the session id when ``session_id`` is missing, and ``thread_name``, the session's
name. Measured on 0.171.0 (with ``--dangerously-bypass-hook-trust``): ``additionalContext``
from SessionStart and UserPromptSubmit arrives as ``role: "developer"`` messages.

Codex parses answers with ``deny_unknown_fields`` (its published output schemas set
``additionalProperties: false``), so one stray key makes it reject the whole answer. We write
only ``hookSpecificOutput.{hookEventName, additionalContext}`` on SessionStart,
UserPromptSubmit and PostToolUse, and ``{}`` otherwise. **Stop never carries
``hookSpecificOutput``**: its schema has no such key.

Edits. Codex writes files with one tool, ``apply_patch``, whose ``tool_input.command`` is the
raw patch text (the reference; Codex's published input schema leaves ``tool_input`` open). The
paths are its ``*** Update File: P``, ``*** Add File: P``, ``*** Delete File: P`` and
``*** Move to: P`` header lines (:func:`patch_paths`); ``tool_input.input``, a string
``tool_input`` and a ``["apply_patch", PATCH]`` command list are read the same way, for older
versions. A model that is not offered the ``apply_patch`` tool (measured on 0.171.0: a model
Codex does not know, such as the tests' stand-in, gets only ``exec_command``) patches through
the shell, ``apply_patch <<'EOF' ... EOF``, which Codex intercepts and applies itself; its
PreToolUse then says ``tool_name: "Bash"`` with that command, and no PostToolUse fired for it
(measured). So a ``Bash`` command that starts with ``apply_patch`` is read as a patch too, and
PreToolUse is registered with the matcher ``apply_patch|Bash`` (the reference: matchers may say
``apply_patch``, ``Edit`` or ``Write``; other shell commands are answered at once, without the
daemon).

PreToolUse's output schema in 0.171.0 (read from the binary) has ``hookSpecificOutput.
{hookEventName, permissionDecision, permissionDecisionReason, additionalContext, updatedInput}``
and Codex rejects ``permissionDecision: "allow"`` and ``"ask"`` as unsupported. So allow with a
warning is ``{hookEventName, additionalContext}`` only ("model-visible context without
blocking", the reference), deny is ``permissionDecision: "deny"`` with its reason, and **ask
is answered as deny**: Codex cannot ask a person, and letting an edit the daemon wanted a
person to confirm go ahead unseen is the worse failure; the model reads the reason and can ask
in the conversation.

Hooks are skipped silently until the user trusts them (``/hooks``); that is the installer's and
``doctor``'s business. Timeouts are in seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    EventKind,
    Fields,
    claude_style_config,
    spec_table,
)
from crosstalk.core.dialects.claude import additional_context, decision_answer

CLIENT = "codex"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
PATCH_TOOL = "apply_patch"
SHELL_TOOL = "Bash"
MATCHERS = {"PreToolUse": f"{PATCH_TOOL}|{SHELL_TOOL}"}
#: The patch header lines that name a file the patch writes (``Move to`` names the new path).
PATCH_HEADERS = ("*** Update File: ", "*** Add File: ", "*** Delete File: ", "*** Move to: ")
KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.BEFORE_TOOL,
    "PostToolUse": EventKind.TOOL_USE,
    "PermissionRequest": EventKind.OTHER,
    "Stop": EventKind.STOP,
}
CARRIERS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def patch_paths(patch: str) -> list[str]:
    """The paths an ``apply_patch`` patch names in its file headers, in order.

    A header starts its line (hunk lines start with a space, ``+`` or ``-``, so patched text
    that looks like a header is never read as one); the path is the rest of the line, taken
    literally (spaces inside it, a leading ``-``), without the surrounding whitespace.
    """
    found: list[str] = []
    for line in patch.split("\n"):
        if not line.startswith("*** "):
            continue
        for header in PATCH_HEADERS:
            if line.startswith(header):
                found.append(line[len(header) :].strip())
                break
    return found


def _patches(tool_input: object) -> Iterable[str]:
    if isinstance(tool_input, str):
        yield tool_input
    elif isinstance(tool_input, Mapping):
        for key in ("command", "input"):
            value = tool_input.get(key)
            if isinstance(value, str):
                yield value
            elif isinstance(value, list):
                yield from (item for item in value if isinstance(item, str))


def _shell_patch(tool_input: object) -> Iterable[str]:
    """A shell command that runs ``apply_patch`` (Codex intercepts it as a patch)."""
    command = tool_input.get("command") if isinstance(tool_input, Mapping) else None
    if isinstance(command, str) and command.lstrip().startswith(PATCH_TOOL):
        yield command


def patch_edits(tool: str | None, payload: Mapping[str, object]) -> list[str]:
    """The :data:`~crosstalk.core.dialects.base.EditReader` for ``apply_patch`` calls, direct or
    through the shell."""
    tool_input = payload.get("tool_input")
    if tool == PATCH_TOOL:
        patches = _patches(tool_input)
    elif tool == SHELL_TOOL:
        patches = _shell_patch(tool_input)
    else:
        return []
    return [path for patch in patches for path in patch_paths(patch)]


def before_tool(event: str, text: str, decision: EditDecision) -> tuple[dict[str, object], bool]:
    """Allow: ``additionalContext`` only. Ask and deny: a deny with the reason (see above)."""
    if decision is EditDecision.ALLOW:
        return additional_context(event, text), True
    return decision_answer(event, text, "deny"), True


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, HOOK_TIMEOUT_S, MATCHERS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
    fields=Fields(
        session_id=(("session_id",), ("thread_id",)),
        session_name=(("thread_name",),),
    ),
    edits=patch_edits,
    before_tool=before_tool,
)
