"""`crosstalk relay serve|status` (placeholder until the relay lands)."""

from __future__ import annotations

import typer

app = typer.Typer(help="Run or check a relay.", no_args_is_help=True)
