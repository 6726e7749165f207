"""Goose: a plugin directory with our hooks, and an MCP extension in ``config.yaml``.

Goose reads hooks from plugins under ``~/.agents/plugins/<name>/`` laid out like a Claude Code
plugin (``plugin.json``, ``hooks/hooks.json``); both files are ours alone, so uninstalling
removes them. The server is a stdio extension under ``extensions:`` in
``$XDG_CONFIG_HOME/goose/config.yaml`` (``~/.config/goose``), with Goose's own key names
(``cmd``, ``args``, ``envs``, ``timeout`` in seconds).
"""

from __future__ import annotations

from pathlib import Path

from crosstalk.core.dialects import dialect_for
from crosstalk.install.base import SERVER_NAME, Commands, Edit, Inspection, Places
from crosstalk.install.common import hooks_edit
from crosstalk.install.jsondoc import JsonObject, json_edit, load_quietly, our_commands, prune
from crosstalk.install.yamldoc import YamlMapping, child_mapping, yaml_edit
from crosstalk.install.yamldoc import load_quietly as load_yaml_quietly

CLIENT = "goose"
MANIFEST: JsonObject = {
    "name": SERVER_NAME,
    "description": "Shared, end-to-end encrypted rooms for several people's coding agents",
}


def _plugin(places: Places) -> Path:
    return places.home / ".agents" / "plugins" / SERVER_NAME


def _config(places: Places) -> Path:
    return places.xdg_config / "goose" / "config.yaml"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    def manifest(data: JsonObject) -> None:
        for key, value in MANIFEST.items():
            if commands is None:
                data.pop(key, None)
            else:
                data[key] = value

    def extension(data: YamlMapping) -> None:
        extensions = child_mapping(_config(places), data, "extensions")
        if commands is None:
            extensions.pop(SERVER_NAME, None)
        else:
            extensions[SERVER_NAME] = {
                "enabled": True,
                "type": "stdio",
                "name": SERVER_NAME,
                "description": MANIFEST["description"],
                "cmd": commands.server_command,
                "args": commands.server_args,
                "envs": {},
                "timeout": 300,
            }
        prune(data, "extensions")

    hooks = _plugin(places) / "hooks" / "hooks.json"
    return [
        json_edit(_plugin(places) / "plugin.json", manifest),
        hooks_edit(hooks, CLIENT, commands),
        yaml_edit(_config(places), extension),
    ]


def inspect(places: Places) -> Inspection:
    hooks = load_quietly(_plugin(places) / "hooks" / "hooks.json").get("hooks")
    extensions = load_yaml_quietly(_config(places)).get("extensions")
    return Inspection(
        client=CLIENT,
        expected=dialect_for(CLIENT).registered,
        hooks=our_commands(hooks, CLIENT),
        mcp=isinstance(extensions, dict) and SERVER_NAME in extensions,
    )


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Goose."
    return (
        "Restart Goose. It hears crosstalk between turns only (when a turn tries to end), "
        "since it cannot add to a turn in flight."
    )


def cleanup(places: Places) -> None:
    """After uninstalling: remove the plugin's directories if nothing else is in them, and the
    ``~/.agents/plugins`` and ``~/.agents`` above them when they are left empty too (install
    made them when they were missing)."""
    plugin = _plugin(places)
    for folder in (plugin / "hooks", plugin, plugin.parent, plugin.parent.parent):
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
