"""Qwen Code: hooks and the MCP server both in ``~/.qwen/settings.json``.

Hook timeouts are milliseconds (the dialect writes them so); the server is marked
``"trust": true`` so its tools run without a confirmation per call (measured).
"""

from __future__ import annotations

from crosstalk.install.base import Commands, Edit, Inspection, Places
from crosstalk.install.common import inspect_json, settings_edit

CLIENT = "qwen"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    return [settings_edit(places.home / ".qwen" / "settings.json", CLIENT, commands, trust=True)]


def inspect(places: Places) -> Inspection:
    settings = places.home / ".qwen" / "settings.json"
    return inspect_json(CLIENT, settings, settings)


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Qwen Code sessions."
    return "Restart Qwen Code so it reads the new hooks and MCP server."
