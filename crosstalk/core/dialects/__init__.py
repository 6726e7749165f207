"""Hook dialects: one pure description per client of what its hook sends and accepts.

Theory of operation
-------------------
:func:`dialect_for` maps a client name to its :class:`~crosstalk.core.dialects.base.Dialect`,
importing only that client's module (the hook program pays for one dialect, not nine). There
is no registry to fill at import time: the module name is the client name.

:func:`detect_client` is for a hook command installed without ``--client``: it sniffs the
payload the way the reference does (Antigravity by ``conversationId``, Hermes by its snake_case
event names, Goose by a bare ``event`` field, Cursor by ``cursor_version``/``workspace_roots``,
Gemini by its own event names) and falls back to Claude Code, whose answers Codex and Qwen Code
also accept. Kimi Code's payload is identical to Claude Code's, so Kimi is only ever named
explicitly. Installed commands always pass ``--client`` (see ``hook_config``), so detection is a
fallback, not the main path.
"""

from __future__ import annotations

import re

from crosstalk.core.dialects.base import (
    Decision,
    Dialect,
    EditDecision,
    EventKind,
    HookEvent,
    first_str,
    load_payload,
)
from crosstalk.errors import LocalProtocolError

__all__ = [
    "CLIENTS",
    "Decision",
    "Dialect",
    "EditDecision",
    "EventKind",
    "HookEvent",
    "detect_client",
    "dialect_for",
    "hook_config",
]

CLIENTS = ("claude", "codex", "qwen", "gemini", "cursor", "agy", "kimi", "hermes", "goose")
ALIASES = {
    "claude-code": "claude",
    "claude_code": "claude",
    "qwen-code": "qwen",
    "gemini-cli": "gemini",
    "cursor-agent": "cursor",
    "antigravity": "agy",
    "kimi-code": "kimi",
    "hermes-agent": "hermes",
}
_HERMES_EVENT = re.compile(r"^(pre|post|on)_[a-z_]+$")
_GEMINI_EVENTS = frozenset(
    {"BeforeAgent", "AfterAgent", "BeforeTool", "AfterTool", "BeforeModel", "AfterModel"}
)


def dialect_for(client: str) -> Dialect:
    """The dialect for ``client`` (a name in :data:`CLIENTS` or one of :data:`ALIASES`).

    Raises:
        LocalProtocolError: the client is not one crosstalk speaks to.
    """
    name = ALIASES.get(client.lower(), client.lower())
    if name not in CLIENTS:
        known = ", ".join(CLIENTS)
        raise LocalProtocolError(f"crosstalk has no hook dialect for {client!r} ({known}).")
    # __import__, not importlib.import_module: importlib costs the hook start-up time.
    module = __import__(f"crosstalk.core.dialects.{name}", fromlist=["DIALECT"])
    dialect = getattr(module, "DIALECT", None)
    if not isinstance(dialect, Dialect):
        raise LocalProtocolError(f"crosstalk.core.dialects.{name} defines no DIALECT.")
    return dialect


def hook_config(client: str, command: str) -> dict[str, object]:
    """The hook entries ``client`` needs, in its config file's shape, running ``command``."""
    return dialect_for(client).hook_config(command)


def detect_client(argv_event: str | None, stdin_text: str) -> str:
    """Guess the client from the payload (see the module docstring); never raises."""
    payload = load_payload(stdin_text)
    named = first_str(payload, (("hook_event_name",), ("hookEventName",)))
    event = named or (argv_event if isinstance(argv_event, str) else None) or ""
    if isinstance(payload.get("conversationId"), str):
        return "agy"
    if _HERMES_EVENT.match(event):
        return "hermes"
    if isinstance(payload.get("event"), str) and named is None:
        return "goose"
    if isinstance(payload.get("cursor_version"), str) or isinstance(
        payload.get("workspace_roots"), list
    ):
        return "cursor"
    if event in _GEMINI_EVENTS:
        return "gemini"
    return "claude"
