"""Codex: hooks in ``$CODEX_HOME/hooks.json``, the MCP server in ``$CODEX_HOME/config.toml``.

``config.toml`` is TOML and belongs to the user; we add one marked block holding
``[mcp_servers.crosstalk]`` with ``default_tools_approval_mode = "approve"`` (without it Codex
refuses every call under the "never" approval policy, measured). Codex silently skips hooks
nobody has trusted through ``/hooks``; the trust record lives in ``config.toml`` as
``[hooks.state."<hooks.json>:<event_snake>:<group>:<handler>"]``, which Codex writes itself and
which :func:`inspect` reads to say which of our hooks are still untrusted.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from crosstalk.core.dialects import dialect_for
from crosstalk.install.base import SERVER_NAME, Commands, Edit, Inspection, Places, is_ours
from crosstalk.install.common import hooks_edit
from crosstalk.install.jsondoc import load_quietly, our_commands
from crosstalk.install.tomlblock import load_quietly as load_toml_quietly
from crosstalk.install.tomlblock import toml_block_edit, toml_table

CLIENT = "codex"
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _paths(places: Places) -> tuple[Path, Path]:
    return places.codex_home / "hooks.json", places.codex_home / "config.toml"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    hooks_path, config_path = _paths(places)
    expected: dict[str, object] | None = None
    body: list[str] = []
    if commands is not None:
        expected = {
            "command": commands.server_command,
            "args": commands.server_args,
            "default_tools_approval_mode": "approve",
            # Codex hands MCP servers a minimal environment: pass the identity through, or a
            # non-default CROSSTALK_HOME would act as ~/.crosstalk. And wait for our tools
            # before the first turn (the server takes a moment to start), measured in CI.
            "env_vars": ["CROSSTALK_HOME", "CROSSTALK_RELAY"],
            "required": True,
        }
        body = toml_table(f"mcp_servers.{SERVER_NAME}", expected)
    return [
        hooks_edit(hooks_path, CLIENT, commands),
        toml_block_edit(
            config_path,
            body,
            check=lambda doc: expected is None or _server(doc) == expected,
            owned_headers=(f"[mcp_servers.{SERVER_NAME}]",),
        ),
    ]


def _server(doc: dict[str, Any]) -> object:
    servers = doc.get("mcp_servers")
    return servers.get(SERVER_NAME) if isinstance(servers, dict) else None


def trust_key(hooks_path: Path, event: str, group: int, handler: int) -> str:
    """The key Codex files a hook's trust under."""
    return f"{hooks_path}:{_SNAKE.sub('_', event).lower()}:{group}:{handler}"


def _untrusted(hooks_path: Path, config_path: Path) -> tuple[str, ...]:
    """Events with one of our handlers that has no trust record (the hash itself cannot be
    checked: Codex computes it over its own normalised form of the handler)."""
    section = load_quietly(hooks_path).get("hooks")
    doc = load_toml_quietly(config_path)
    hooks_table = doc.get("hooks")
    state = hooks_table.get("state", {}) if isinstance(hooks_table, dict) else {}
    state = state if isinstance(state, dict) else {}
    missing: list[str] = []
    for event, groups in (section.items() if isinstance(section, dict) else []):
        for g, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not (isinstance(handler, dict) and is_ours(handler.get("command"), CLIENT)):
                    continue
                record = state.get(trust_key(hooks_path, event, g, h))
                if not (isinstance(record, dict) and record.get("trusted_hash")):
                    missing.append(event)
    return tuple(missing)


def inspect(places: Places) -> Inspection:
    hooks_path, config_path = _paths(places)
    return Inspection(
        client=CLIENT,
        expected=dialect_for(CLIENT).registered,
        hooks=our_commands(load_quietly(hooks_path).get("hooks"), CLIENT),
        mcp=_server(load_toml_quietly(config_path)) is not None,
        untrusted=_untrusted(hooks_path, config_path),
    )


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Nothing else to do; restart running Codex sessions."
    return (
        "Codex runs no hook it has not been told to trust, and says nothing when it skips one: "
        "run `codex`, type /hooks, and trust each crosstalk entry (SessionStart, "
        "UserPromptSubmit, PreToolUse, PostToolUse, Stop). `crosstalk doctor` lists any still "
        "untrusted."
    )
