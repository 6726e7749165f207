"""Claude Code: hooks in ``~/.claude/settings.json``, the MCP server in ``~/.claude.json``.

Both are user scope, so every project sees crosstalk. The same hooks also ship as the plugin in
this repository (``hooks/hooks.json``); a person uses one or the other, and ``next`` says so.
The MCP entry is what ``claude mcp add -s user crosstalk -- crosstalk server`` would write.
"""

from __future__ import annotations

from crosstalk.install.base import Commands, Edit, Inspection, Places
from crosstalk.install.common import hooks_edit, inspect_json, mcp_edit, server_entry

CLIENT = "claude"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    entry = None if commands is None else server_entry(commands, type="stdio")
    return [
        hooks_edit(places.claude_dir / "settings.json", CLIENT, commands),
        mcp_edit(places.claude_json, entry),
    ]


def inspect(places: Places) -> Inspection:
    return inspect_json(CLIENT, places.claude_dir / "settings.json", places.claude_json)


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Claude Code sessions so they stop running crosstalk's hooks."
    return (
        "Restart Claude Code, and allow the crosstalk_* tools when it asks. Use either this or "
        "the plugin (/plugin marketplace add, then /plugin install crosstalk@epode), not both, "
        "or every hook runs twice."
    )
