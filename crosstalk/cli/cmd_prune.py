"""``crosstalk prune``: finished history older than some days leaves this machine's store."""

from __future__ import annotations

from typing import Annotated

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors

#: The daemon's default (crosstalk/store/retention.py DEFAULT_DAYS), for the help.
DEFAULT_DAYS_HELP = 30
#: Seconds to wait: a first prune of a large store is many short transactions.
PRUNE_TIMEOUT = 600.0


@reports_errors
def prune(
    older_than: Annotated[
        float | None,
        typer.Option(
            "--older-than",
            help=f"Days to keep (default {DEFAULT_DAYS_HELP}, what the daemon keeps by itself).",
            metavar="DAYS",
        ),
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Delete read messages, shown notices and the attention record older than DAYS.

    Unread messages, pending notices, open asks and undelivered sends stay, however old.
    The daemon does the same with the default every few hours.
    """
    reply = ask(home, "prune", {"older_than_days": older_than}, timeout=PRUNE_TIMEOUT)
    removed = {k: int(v) for k, v in reply["removed"].items()}
    total = sum(removed.values())
    days = reply["older_than_days"]
    detail = ", ".join(f"{count} {table}" for table, count in removed.items() if count)
    human = f"Pruned {total} row(s) older than {days:g} day(s)"
    human += f": {detail}." if detail else "."
    show(json_output, {"older_than_days": days, "removed": removed, "total": total}, human)
