"""Hermes Agent: ``hooks:`` and ``mcp_servers:`` in ``~/.hermes/config.yaml``.

Hermes's hooks are ``{event: [{command, timeout}, ...]}`` (flat lists, the dialect's shape),
spliced like Cursor's so others' handlers stay. Hermes asks the user to approve each new
(event, command) pair before it runs it; ``next`` says how.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from crosstalk.core.dialects import dialect_for, hook_config
from crosstalk.install.base import SERVER_NAME, Commands, Edit, Inspection, Places
from crosstalk.install.jsondoc import JsonObject, our_commands, prune, splice_hooks
from crosstalk.install.yamldoc import YamlMapping, child_mapping, load_quietly, yaml_edit

CLIENT = "hermes"


def _path(places: Places) -> Path:
    return places.home / ".hermes" / "config.yaml"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    path = _path(places)
    ours: JsonObject = {}
    entry: JsonObject | None = None
    if commands is not None:
        ours = cast(JsonObject, hook_config(CLIENT, commands.hook_line)["hooks"])
        entry = {"command": commands.server_command, "args": commands.server_args}

    def change(data: YamlMapping) -> None:
        splice_hooks(path, child_mapping(path, data, "hooks"), ours, CLIENT, grouped=False)
        prune(data, "hooks")
        servers = child_mapping(path, data, "mcp_servers")
        if entry is None:
            servers.pop(SERVER_NAME, None)
        else:
            servers[SERVER_NAME] = entry
        prune(data, "mcp_servers")

    return [yaml_edit(path, change)]


def inspect(places: Places) -> Inspection:
    data = load_quietly(_path(places))
    servers = data.get("mcp_servers")
    return Inspection(
        client=CLIENT,
        expected=dialect_for(CLIENT).registered,
        hooks=our_commands(data.get("hooks"), CLIENT, grouped=False),
        mcp=isinstance(servers, dict) and SERVER_NAME in servers,
    )


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Hermes."
    return (
        "Hermes runs a new hook only after you approve it: start `hermes` and answer yes to "
        "each crosstalk hook it shows (or start it once with `--accept-hooks`); "
        "`hermes hooks list` shows them."
    )
