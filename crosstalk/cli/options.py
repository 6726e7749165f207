"""Options every command accepts, written after the command's words (CLI.md)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
HomeOption = Annotated[
    str | None,
    typer.Option("--home", envvar="CROSSTALK_HOME", help="State directory (one identity)."),
]

ToolsOption = Annotated[
    str,
    typer.Option(
        "--tools",
        help="The MCP tools served: core, full, or tool names (NAME,NAME...; profiles and "
        "names mix). Default full.",
    ),
]
