"""Gemini CLI: hooks and the MCP server both in ``~/.gemini/settings.json``.

The prompt hook is ``BeforeAgent`` and timeouts are milliseconds (the dialect writes both);
the server is marked ``"trust": true`` so its tools run without a confirmation per call. Gemini
CLI runs hooks only in folders it trusts (measured), which ``next`` says.
"""

from __future__ import annotations

from crosstalk.install.base import Commands, Edit, Inspection, Places
from crosstalk.install.common import inspect_json, settings_edit

CLIENT = "gemini"


def plan(places: Places, commands: Commands | None) -> list[Edit]:
    return [settings_edit(places.home / ".gemini" / "settings.json", CLIENT, commands, trust=True)]


def inspect(places: Places) -> Inspection:
    settings = places.home / ".gemini" / "settings.json"
    return inspect_json(CLIENT, settings, settings)


def next_step(places: Places, installing: bool) -> str:
    if not installing:
        return "Restart Gemini CLI sessions."
    return (
        "Restart Gemini CLI so it reads the new hooks and MCP server. It runs hooks only in "
        "folders it trusts: answer yes when it asks to trust a project folder."
    )
