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

Config: ``[[hooks]]`` tables in ``~/.kimi-code/config.toml`` with exactly the keys ``event``,
``command`` and ``timeout`` (seconds, 1-600); Kimi refuses the whole file on an unknown key.
:func:`hook_config` returns them as ``{"hooks": [table, ...]}``; the installer writes TOML.
"""

from __future__ import annotations

from crosstalk.core.dialects.base import (
    HOOK_TIMEOUT_S,
    Dialect,
    Fields,
    command_for,
    spec_table,
)
from crosstalk.core.dialects.claude import CLAUDE_KINDS

CLIENT = "kimi"
REGISTERED = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
CARRIERS = ("UserPromptSubmit",)


def _answer(event: str, text: str) -> dict[str, object]:
    return {"message": text}


def _config(command: str) -> dict[str, object]:
    tables = [
        {"event": event, "command": command_for(command, CLIENT, event), "timeout": HOOK_TIMEOUT_S}
        for event in REGISTERED
    ]
    return {"hooks": tables}


DIALECT = Dialect(
    client=CLIENT,
    events=spec_table(CLAUDE_KINDS, CARRIERS),
    answer_text=_answer,
    registered=REGISTERED,
    config=_config,
    fields=Fields(session_name=(("session_title",),)),
)
