"""Options every command accepts, written after the command's words (CLI.md)."""

from __future__ import annotations

from typing import Annotated

import typer

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
HomeOption = Annotated[
    str | None,
    typer.Option("--home", envvar="CROSSTALK_HOME", help="State directory (one identity)."),
]
