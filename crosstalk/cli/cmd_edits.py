"""`crosstalk edits`: which files other people's agents changed lately, and the settings of edit
awareness (`crosstalk room edits ROOM on|off` turns one room's sharing off)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible
from crosstalk.errors import UsageError


def on_off(text: str) -> bool:
    """``on`` → True, ``off`` → False.

    Raises:
        UsageError: anything else.
    """
    value = text.strip().lower()
    if value not in ("on", "off"):
        raise UsageError(f"{text!r} is neither on nor off.")
    return value == "on"


def _line(edit: dict[str, Any], now: float) -> str:
    def one(key: str) -> str:
        return visible(str(edit.get(key) or ""), one_line=True)

    who = f"{one('label')}/{one('session')}" if edit.get("label") else f"you/{one('session')}"
    minutes = max(0, int(now - float(edit["edited_at"])) // 60)
    note = f"  ({one('note')})" if edit.get("note") else ""
    return f"  {who:<28} {one('repo')}/{one('path')}  {minutes} min ago{note}"


def _render(reply: dict[str, Any]) -> str:
    now = time.time()
    lines = [_line(e, now) for e in reply["edits"]] or ["  Nobody else changed files lately."]
    lines += [_line(e, now) for e in reply["mine"]]
    off = [visible(str(r["room"]), one_line=True) for r in reply["rooms"] if not r["share"]]
    lines += [
        "",
        f"  window         {reply['window_minutes']:g} minutes",
        f"  on reserved    {reply['on_reserved']} (a file someone else holds exclusively)",
        "  not shared in  " + (", ".join(f"#{name}" for name in off) or "(every room shares)"),
    ]
    return "\n".join(lines)


@reports_errors
def edits(
    on_reserved: Annotated[
        str | None,
        typer.Option("--on-reserved", help="allow, ask or block before writing a file someone "
                     "else holds exclusively."),
    ] = None,
    window: Annotated[
        float | None, typer.Option("--window", help="Keep and show edits this many minutes.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Which files other people's agents changed lately; show or set edit awareness."""
    reply = ask(home, "edits", {"on_reserved": on_reserved, "window_minutes": window})
    show(json_output, reply, _render(reply))
