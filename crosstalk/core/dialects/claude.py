"""Claude Code's hook dialect.

Theory of operation
-------------------
Claude Code sends ``{session_id, transcript_path, cwd, hook_event_name, ...}`` on stdin
(UserPromptSubmit adds ``prompt``; Stop adds ``stop_hook_active``). Text reaches the model
through ``{"hookSpecificOutput": {"hookEventName": E, "additionalContext": T}}`` on
SessionStart, UserPromptSubmit and PostToolUse; measured on 2.1.197 and 2.1.332, the context
lands in a ``role: "system"`` message of the next model request. Nothing to say is ``{}``.

Decisions recorded here:

- **Stop never carries text.** Measured: a Stop hook that prints ``additionalContext`` makes
  Claude Code continue the turn, and it looped nine times before stopping. The reference's
  ``{"continue": true}`` empty answer is equivalent to ``{}``; we print ``{}``, the smaller
  valid answer.
- **PreToolUse answers edits only**, and only for the file-writing tools (its matcher):
  ``Edit``, ``Write``, ``MultiEdit`` (``tool_input.file_path``) and ``NotebookEdit``
  (``tool_input.notebook_path``). Both pinned versions (2.1.197, 2.1.332) parse
  ``hookSpecificOutput.{permissionDecision, permissionDecisionReason, additionalContext}``
  there (read in their bundles; the changelog dates ``additionalContext`` to 2.1.9). Allow
  with a warning is ``additionalContext`` alone, so the normal permission flow still runs;
  ask is ``permissionDecision: "ask"`` with the reason, which Claude Code shows the user but
  not the model, so the same text also goes in ``additionalContext``; deny is
  ``permissionDecision: "deny"`` with the reason, which the model reads.
  :func:`can_carry_text` stays False for it: notices never ride on a pre-tool answer.
- PostToolUse reports the same tools' paths as edited.
- Timeouts are in seconds.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    EditDecision,
    EventKind,
    Path,
    claude_style_config,
    spec_table,
    tool_paths,
)

CLIENT = "claude"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")
_FILE_PATH: tuple[Path, ...] = (("tool_input", "file_path"),)
#: The tools that write files, and where their input names the file.
WRITING_TOOLS: dict[str, tuple[Path, ...]] = {
    "Edit": _FILE_PATH,
    "Write": _FILE_PATH,
    "MultiEdit": _FILE_PATH,
    "NotebookEdit": (("tool_input", "notebook_path"),),
}
#: Claude Code reads a matcher of names and ``|`` as a list of exact tool names.
MATCHERS = {"PreToolUse": "|".join(WRITING_TOOLS)}

#: Event names shared by Claude Code, Codex, Qwen Code and Kimi Code.
CLAUDE_KINDS = {
    "SessionStart": EventKind.SESSION_START,
    "UserPromptSubmit": EventKind.PROMPT,
    "PreToolUse": EventKind.BEFORE_TOOL,
    "PostToolUse": EventKind.TOOL_USE,
    "PostToolUseFailure": EventKind.TOOL_USE,
    "Stop": EventKind.STOP,
    "SubagentStop": EventKind.OTHER,
    "Notification": EventKind.OTHER,
    "PreCompact": EventKind.OTHER,
    "SessionEnd": EventKind.OTHER,
}
CARRIERS = ("SessionStart", "UserPromptSubmit", "PostToolUse")


def additional_context(event: str, text: str) -> dict[str, object]:
    """The Claude-style answer carrying ``text``: ``hookSpecificOutput`` with two keys only."""
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def decision_answer(event: str, text: str, decision: str, **extra: str) -> dict[str, object]:
    """``hookSpecificOutput`` with a ``permissionDecision`` and its reason, then ``extra``
    (Claude Code, Codex, Qwen Code and Kimi Code share the shape)."""
    inner = {
        "hookEventName": event,
        "permissionDecision": decision,
        "permissionDecisionReason": text,
        **extra,
    }
    return {"hookSpecificOutput": inner}


def before_tool(event: str, text: str, decision: EditDecision) -> tuple[dict[str, object], bool]:
    """Allow: ``additionalContext`` alone. Ask: the decision, its reason (for the user) and the
    same text as ``additionalContext`` (for the model). Deny: the decision and its reason."""
    if decision is EditDecision.ALLOW:
        return additional_context(event, text), True
    if decision is EditDecision.ASK:
        return decision_answer(event, text, "ask", additionalContext=text), True
    return decision_answer(event, text, "deny"), True


def _config(command: str) -> dict[str, object]:
    return claude_style_config(command, CLIENT, REGISTERED, HOOK_TIMEOUT_S, MATCHERS)


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=additional_context,
    registered=REGISTERED,
    config=_config,
    edits=tool_paths(WRITING_TOOLS),
    before_tool=before_tool,
)
