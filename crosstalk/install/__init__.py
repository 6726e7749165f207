"""``crosstalk install CLIENT`` / ``uninstall CLIENT``: put crosstalk into each coding agent.

One module per client plans its edits (:mod:`crosstalk.install.base` explains planning, backups
and idempotence); this module picks the client, applies the plan and says what is left to do.
``mcp`` writes nothing and prints the generic stdio entry; ``path`` puts ``crosstalk`` on PATH.
"""

from __future__ import annotations

import datetime as dt
import os
from types import ModuleType

from crosstalk.errors import UsageError
from crosstalk.install import agy, claude, codex, cursor, gemini, goose, hermes, kimi, path, qwen
from crosstalk.install.base import (
    Commands,
    Inspection,
    Outcome,
    Places,
    apply_edits,
    resolve_commands,
)

__all__ = [
    "CLIENTS",
    "Commands",
    "Inspection",
    "Outcome",
    "Places",
    "inspect_all",
    "install",
    "resolve_commands",
    "uninstall",
]

MODULES: dict[str, ModuleType] = {
    module.CLIENT: module
    for module in (claude, codex, cursor, qwen, gemini, agy, kimi, hermes, goose)
}
ALIASES = {
    "claude-code": "claude",
    "cursor-agent": "cursor",
    "antigravity": "agy",
    "qwen-code": "qwen",
    "gemini-cli": "gemini",
    "kimi-code": "kimi",
}
#: Every name ``install`` accepts, in the order help lists them.
CLIENTS = (*MODULES, "mcp", "path")


def canonical(client: str) -> str:
    """The client's canonical name.

    Raises:
        UsageError: not a client crosstalk installs into.
    """
    name = ALIASES.get(client.lower(), client.lower())
    if name not in CLIENTS:
        known = ", ".join(CLIENTS)
        raise UsageError(f"crosstalk cannot install into {client!r}; choose one of: {known}.")
    return name


def _now(now: dt.datetime | None) -> dt.datetime:
    return now if now is not None else dt.datetime.now(dt.UTC)


def mcp_entry(commands: Commands) -> dict[str, object]:
    """The generic stdio entry for any MCP client (opencode, Zed, Cline, Continue, Amp, crush)."""
    return {"command": commands.server_command, "args": commands.server_args}


def install(
    client: str,
    places: Places,
    commands: Commands,
    *,
    now: dt.datetime | None = None,
    environ_path: str | None = None,
) -> Outcome:
    """Install crosstalk's hooks and MCP server into ``client``'s config.

    Raises:
        InvalidConfig: a file it would change does not parse (nothing was written).
        UsageError: unknown client.
    """
    name = canonical(client)
    if name == "path":
        search = os.environ.get("PATH", "") if environ_path is None else environ_path
        return path.install(places, commands, search)
    if name == "mcp":
        entry = mcp_entry(commands)
        step = (
            "Add this stdio server to your MCP client's configuration (opencode, Zed, Cline, "
            "Continue, Amp, crush, ...) under the name `crosstalk`."
        )
        return Outcome(client=name, files=[], backups=[], next=step, entry=entry)
    module = MODULES[name]
    files, backups = apply_edits(module.plan(places, commands), _now(now))
    return Outcome(client=name, files=files, backups=backups, next=module.next_step(places, True))


def uninstall(client: str, places: Places, *, now: dt.datetime | None = None) -> Outcome:
    """Remove exactly what ``install`` added to ``client``'s config; keep everything else."""
    name = canonical(client)
    if name == "path":
        return path.uninstall(places)
    if name == "mcp":
        step = "crosstalk wrote nothing for `mcp`; remove the crosstalk entry from your client."
        return Outcome(client=name, files=[], backups=[], next=step)
    module = MODULES[name]
    files, backups = apply_edits(module.plan(places, None), _now(now))
    cleanup = getattr(module, "cleanup", None)
    if cleanup is not None:
        cleanup(places)
    return Outcome(client=name, files=files, backups=backups, next=module.next_step(places, False))


def inspect_all(places: Places) -> list[Inspection]:
    """What of ours each client's config holds now, for every client."""
    return [module.inspect(places) for module in MODULES.values()]
