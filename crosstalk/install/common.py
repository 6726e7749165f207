"""Plans shared by the clients whose files are JSON: a hooks file and an MCP servers file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

from crosstalk.core.dialects import dialect_for, hook_config
from crosstalk.install.base import SERVER_NAME, Commands, Edit, Inspection
from crosstalk.install.jsondoc import (
    JsonObject,
    child_object,
    json_edit,
    load_quietly,
    our_commands,
    prune,
    splice_hooks,
)


def our_hooks(client: str, commands: Commands | None) -> JsonObject:
    """The ``hooks`` section of the client's dialect config, or ``{}`` when uninstalling."""
    if commands is None:
        return {}
    config = hook_config(client, commands.hook_line)
    return cast(JsonObject, config["hooks"])


Change = Callable[[JsonObject], None]


def hooks_change(
    path: Path,
    client: str,
    commands: Commands | None,
    *,
    grouped: bool = True,
    top: JsonObject | None = None,
) -> Change:
    """Put (or, with ``commands`` None, remove) our hooks under ``hooks``.

    ``top`` holds keys the client requires beside ``hooks`` (Cursor's ``version``); they are
    set only when absent, and removed only when nothing but them is left.
    """
    ours = our_hooks(client, commands)

    def change(data: JsonObject) -> None:
        if ours and top:
            for key, value in top.items():
                data.setdefault(key, value)
        section = child_object(path, data, "hooks")
        splice_hooks(path, section, ours, client, grouped=grouped)
        prune(data, "hooks")
        if not ours and top and all(k in top and top[k] == v for k, v in data.items()):
            data.clear()  # only the keys we required are left: the file was ours alone

    return change


def mcp_change(path: Path, entry: JsonObject | None, *, key: str = "mcpServers") -> Change:
    """Put ``entry`` under ``key``/crosstalk (None removes it)."""

    def change(data: JsonObject) -> None:
        servers = child_object(path, data, key)
        if entry is None:
            servers.pop(SERVER_NAME, None)
        else:
            servers[SERVER_NAME] = entry
        prune(data, key)

    return change


def both(*changes: Change) -> Change:
    """One change doing each of ``changes`` in order (two edits of one file)."""

    def change(data: JsonObject) -> None:
        for each in changes:
            each(data)

    return change


def hooks_edit(
    path: Path,
    client: str,
    commands: Commands | None,
    *,
    grouped: bool = True,
    top: JsonObject | None = None,
) -> Edit:
    """Plan :func:`hooks_change` on ``path`` alone."""
    return json_edit(path, hooks_change(path, client, commands, grouped=grouped, top=top))


def server_entry(commands: Commands, **extra: object) -> JsonObject:
    """``{"command", "args"}`` for ``crosstalk server``, plus client-specific keys."""
    return {"command": commands.server_command, "args": commands.server_args, **extra}


def mcp_edit(path: Path, entry: JsonObject | None, *, key: str = "mcpServers") -> Edit:
    """Plan :func:`mcp_change` on ``path`` alone."""
    return json_edit(path, mcp_change(path, entry, key=key))


def settings_edit(path: Path, client: str, commands: Commands | None, **server: object) -> Edit:
    """Hooks and the MCP server in one settings file (Qwen Code, Gemini CLI)."""
    entry = None if commands is None else server_entry(commands, **server)
    return json_edit(path, both(hooks_change(path, client, commands), mcp_change(path, entry)))


def mcp_registered(path: Path, key: str = "mcpServers") -> bool:
    servers = load_quietly(path).get(key)
    return isinstance(servers, dict) and SERVER_NAME in servers


def inspect_json(
    client: str, hooks_path: Path, mcp_path: Path, *, grouped: bool = True
) -> Inspection:
    """What of ours the two files hold now."""
    found = our_commands(load_quietly(hooks_path).get("hooks"), client, grouped=grouped)
    return Inspection(
        client=client,
        expected=dialect_for(client).registered,
        hooks=found,
        mcp=mcp_registered(mcp_path),
    )
