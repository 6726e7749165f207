"""Antigravity (``agy``): ``~/.gemini/config/hooks.json`` and ``~/.gemini/config/mcp_config.json``.

Antigravity's hooks file maps hook *names* to per-event handler lists; ours is the whole
``crosstalk`` entry, so installing replaces that entry and uninstalling deletes it, and no other
name is ever read or changed. Its MCP file is the usual ``{"mcpServers": {...}}``.
"""

from __future__ import annotations

from pathlib import Path

from crosstalk.core.dialects import dialect_for, hook_config
from crosstalk.core.dialects.agy import HOOK_NAME
from crosstalk.install.base import Commands, Edit, Inspection, Places
from crosstalk.install.common import mcp_edit, mcp_registered, server_entry
from crosstalk.install.jsondoc import JsonObject, json_edit, load_quietly, our_commands

CLIENT = "agy"


def _dir(places: Places) -> Path:
    return places.home / ".gemini" / "config"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    ours = None if commands is None else hook_config(CLIENT, commands.hook_line)[HOOK_NAME]

    def change(data: JsonObject) -> None:
        if ours is None:
            data.pop(HOOK_NAME, None)
        else:
            data[HOOK_NAME] = ours

    entry = None if commands is None else server_entry(commands)
    return [
        json_edit(_dir(places) / "hooks.json", change),
        mcp_edit(_dir(places) / "mcp_config.json", entry),
    ]


def inspect(places: Places) -> Inspection:
    section = load_quietly(_dir(places) / "hooks.json").get(HOOK_NAME)
    return Inspection(
        client=CLIENT,
        expected=dialect_for(CLIENT).registered,
        hooks=our_commands(section, CLIENT, grouped=False),
        mcp=mcp_registered(_dir(places) / "mcp_config.json"),
    )


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart agy sessions."
    return "Restart agy so it reads the new hook and MCP server."
