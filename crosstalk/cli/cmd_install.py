"""`crosstalk install CLIENT|path` and `crosstalk uninstall CLIENT`.

:mod:`crosstalk.install` (every client's planner, the YAML and TOML editors) is imported by the
two commands when they run, not when the CLI starts: every other command would pay for it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from crosstalk.cli.options import HomeOption, JsonOption, ToolsOption
from crosstalk.cli.output import Output, reports_errors

if TYPE_CHECKING:
    from crosstalk.install import Outcome

#: The names ``install`` accepts, in ``crosstalk.install.CLIENTS`` order, spelled out here so the
#: help text costs no import; tests/cli/test_startup_imports.py keeps the two equal.
HELP_CLIENTS = (
    "claude",
    "codex",
    "cursor",
    "qwen",
    "gemini",
    "agy",
    "kimi",
    "hermes",
    "goose",
    "mcp",
    "path",
)

ClientArg = Annotated[
    str,
    typer.Argument(help=f"One of: {', '.join(HELP_CLIENTS)}.", show_default=False),
]


def _emit(out: Output, outcome: Outcome, verb: str) -> None:
    import attrs

    data = attrs.asdict(outcome)
    if outcome.entry is None:
        del data["entry"]
    lines = []
    if outcome.entry is not None:
        lines.append(f"command: {outcome.entry['command']}")
        lines.append(f"args:    {json.dumps(outcome.entry['args'])}")
    elif outcome.files:
        lines.append(f"{outcome.client}: {verb} " + ", ".join(outcome.files))
    else:
        lines.append(f"{outcome.client}: nothing to change.")
    if outcome.backups:
        lines.append("backups: " + ", ".join(outcome.backups))
    if outcome.next:
        lines.append(outcome.next)
    out.emit(data, "\n".join(lines))


def install_cmd(
    client: ClientArg,
    tools: ToolsOption = "full",
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Put crosstalk's hooks and MCP server into CLIENT (or `path`: crosstalk on your PATH)."""
    import attrs

    from crosstalk.install import Places, install, resolve_commands
    from crosstalk.mcp.front import listed_names, load_listing
    from crosstalk.mcp.profiles import normalized

    out = Output(json_mode=json_output)
    profile = normalized(tools, listed_names(load_listing()))  # refused before any file is read
    commands = attrs.evolve(resolve_commands(), tools=profile)
    outcome = install(client, Places.from_env(), commands)
    _emit(out, outcome, "wrote")


def uninstall_cmd(
    client: ClientArg, json_output: JsonOption = False, home: HomeOption = None
) -> None:
    """Remove exactly what `crosstalk install CLIENT` added; everything else stays."""
    from crosstalk.install import Places, uninstall

    out = Output(json_mode=json_output)
    outcome = uninstall(client, Places.from_env())
    _emit(out, outcome, "took crosstalk out of")


install_cmd = reports_errors(install_cmd)
uninstall_cmd = reports_errors(uninstall_cmd)


def mount(app: typer.Typer) -> None:
    """Add `install` and `uninstall` to the main app."""
    app.command("install")(install_cmd)
    app.command("uninstall")(uninstall_cmd)
