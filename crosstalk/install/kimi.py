"""Kimi Code: ``[[hooks]]`` tables in ``~/.kimi-code/config.toml``, the server in ``mcp.json``.

Kimi refuses its whole config on an unknown key, so each table carries exactly ``event``,
``command`` and ``timeout`` (the dialect's shape), inside our marked block (see
:mod:`crosstalk.install.tomlblock`). The MCP file is the usual ``{"mcpServers": {...}}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from crosstalk.core.dialects import dialect_for, hook_config
from crosstalk.install.base import Commands, Edit, Inspection, Places, is_ours
from crosstalk.install.common import mcp_edit, mcp_registered, server_entry
from crosstalk.install.tomlblock import load_quietly, toml_block_edit, toml_table

CLIENT = "kimi"


def _dir(places: Places) -> Path:
    return places.home / ".kimi-code"


def _tables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    hooks = doc.get("hooks")
    return [t for t in hooks if isinstance(t, dict)] if isinstance(hooks, list) else []


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    ours: list[dict[str, object]] = []
    if commands is not None:
        ours = cast(list[dict[str, object]], hook_config(CLIENT, commands.hook_line)["hooks"])
    body: list[str] = []
    for table in ours:
        body += toml_table("hooks", table, array=True)

    def check(doc: dict[str, Any]) -> bool:
        tables = _tables(doc)
        return all(table in tables for table in ours)

    entry = None if commands is None else server_entry(commands)
    return [
        toml_block_edit(
            _dir(places) / "config.toml", body, check=check, owned_headers=("[[hooks]]",)
        ),
        mcp_edit(_dir(places) / "mcp.json", entry),
    ]


def inspect(places: Places) -> Inspection:
    found: dict[str, list[str]] = {}
    for table in _tables(load_quietly(_dir(places) / "config.toml")):
        if is_ours(table.get("command"), CLIENT):
            found.setdefault(str(table.get("event")), []).append(str(table["command"]))
    return Inspection(
        client=CLIENT,
        expected=dialect_for(CLIENT).registered,
        hooks=found,
        mcp=mcp_registered(_dir(places) / "mcp.json"),
    )


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Kimi Code sessions."
    return "Restart Kimi Code so it reads the new hooks and MCP server."
