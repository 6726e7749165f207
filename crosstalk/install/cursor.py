"""Cursor (``cursor-agent`` and the editor): ``~/.cursor/hooks.json`` and ``~/.cursor/mcp.json``.

Cursor's hooks file is ``{"version": 1, "hooks": {step: [handler, ...]}}``: flat handler lists,
no groups. ``version`` is set when absent and never removed (others' hooks need it too).
"""

from __future__ import annotations

from crosstalk.install.base import Commands, Edit, Inspection, Places
from crosstalk.install.common import hooks_edit, inspect_json, mcp_edit, server_entry

CLIENT = "cursor"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    base = places.home / ".cursor"
    entry = None if commands is None else server_entry(commands)
    return [
        hooks_edit(base / "hooks.json", CLIENT, commands, grouped=False, top={"version": 1}),
        mcp_edit(base / "mcp.json", entry),
    ]


def inspect(places: Places) -> Inspection:
    base = places.home / ".cursor"
    return inspect_json(CLIENT, base / "hooks.json", base / "mcp.json", grouped=False)


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart cursor-agent (or Cursor) so it stops running crosstalk's hooks."
    return "Restart cursor-agent (or Cursor) so it reads the new hooks and MCP server."
