"""`crosstalk trust`, `crosstalk mute` and `crosstalk attention`: who can interrupt you."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible
from crosstalk.errors import UsageError

#: The trust dial, quietest first: ``crosstalk.core.levels.Level`` in order, spelled out so the
#: help text costs no import (attrs); tests/cli/test_startup_imports.py keeps the two equal.
LADDER = "mute < notify < ask < handoff < deliver"


@reports_errors
def trust(
    who: Annotated[
        str | None, typer.Argument(help="A person, a room, or a level (sets the default).")
    ] = None,
    level: Annotated[
        str | None, typer.Argument(help=f"{LADDER}, or clear to remove the setting.")
    ] = None,
    room: Annotated[
        str | None, typer.Option("--in", help="Pin the person within this room only.")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show or set how much a person or a room can interrupt you."""
    reply = ask(home, "trust", {"who": who, "level": level, "room": room})
    show(json_output, reply, _render_trust(reply))


def _render_trust(reply: dict[str, Any]) -> str:
    def one(value: object) -> str:  # names peers chose (labels, rooms) stay on their line
        return visible(str(value), one_line=True)

    lines = []
    if reply.get("explain"):
        lines += [reply["explain"], ""]
    lines.append(f"  default       {reply['default']}")
    lines.append(f"  local posts   {reply['local']}")
    for name, level in reply["rooms"].items():
        lines.append(f"  room {one(name):<12} {level}")
    for name, level in reply["people"].items():
        lines.append(f"  {one(name):<13} {level}")
    for pin in reply["pins"]:
        lines.append(f"  {one(pin['person']):<13} {pin['level']} in {one(pin['room'])}")
    lines += ["", f"  {LADDER}"]
    return "\n".join(lines)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"{text!r} is not a number of minutes: use 0 or more (0 unmutes).")
    return value


@reports_errors
def mute(
    who: Annotated[
        str | None,
        typer.Argument(help="A person, a #room, or all (everyone). Nothing: list the mutes."),
    ] = None,
    minutes: Annotated[
        str | None, typer.Argument(help="How long, in minutes (default 60; 0 unmutes).")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Hold messages from someone (or everyone: `mute all`) for a while; they wait, nothing is
    dropped. With nothing named, list the mutes."""
    if minutes is None and who is not None and _looks_numeric(who):
        who, minutes = "everyone", who  # `crosstalk mute 30` mutes everyone for 30 minutes
    params: dict[str, Any] = {"who": who}
    if minutes is not None:
        params["minutes"] = _minutes(minutes)
    reply = ask(home, "mute", params)
    now = time.time()
    human = mutes_text(reply, now=now) if who is None else mute_text(who, reply, now=now)
    show(json_output, reply, human)


def mutes_text(reply: dict[str, Any], *, now: float) -> str:
    """Every mute in force, one line each with its end (bare ``crosstalk mute``)."""
    rows = [
        f"  {visible(str(m['who']), one_line=True):<16} until {until_text(m['until'], now=now)}"
        for m in reply["mutes"]
    ]
    return "\n".join(rows) if rows else "Nobody is muted."


def mute_text(who: str, reply: dict[str, Any], *, now: float) -> str:
    """What a mute (or unmute) of ``who`` left: held until when, and by which mute."""
    target = "everyone" if who.strip().lower() in ("*", "all", "everyone") else who
    shown = visible(target, one_line=True)
    if reply["until"] is None:
        return f"{shown}: not muted"
    until = until_text(reply["until"], now=now)
    others = [name for name in reply.get("by", []) if name != target]
    if others and target not in reply.get("by", []):  # e.g. `mute ana 0` under `mute all`
        return (
            f"{shown}: not muted by name, but the mute on {', '.join(others)} holds them "
            f"until {until} (`crosstalk mute all 0` lifts it)"
        )
    return f"{shown}: muted until {until}"


def until_text(until: float, *, now: float) -> str:
    """The local time a mute ends: ``HH:MM`` today, with the day and date on another day (and
    the year in another year)."""
    try:
        end, today = time.localtime(until), time.localtime(now)
    except (OverflowError, OSError, ValueError):  # an end stored before ends were capped
        return "further notice"
    clock = time.strftime("%H:%M", end)
    if end[:3] == today[:3]:
        return clock
    year = f" {end.tm_year}" if end.tm_year != today.tm_year else ""
    day = f"{time.strftime('%a', end)} {end.tm_mday} {time.strftime('%b', end)}{year}"
    return f"{day} {clock}"


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@reports_errors
def attention(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Who has reached you in the last hour, and what is waiting. A record, not a limit."""
    from crosstalk.core.attention import AttentionSummary, render_attention

    reply = ask(home, "attention")
    by_source: dict[str, int] = {}
    for name, count in reply["by_source"].items():  # peers' labels, shown as everywhere else
        shown = visible(str(name), one_line=True)
        by_source[shown] = by_source.get(shown, 0) + int(count)
    summary = AttentionSummary(
        reached_last_hour=int(reply["reached_last_hour"]), held=int(reply["held"]),
        by_source=by_source,
    )
    human = render_attention(summary) + "\n\n  Nothing is capped: turn one source down with trust."
    show(json_output, reply, human)


def mount(app: typer.Typer) -> None:
    """Add ``trust``, ``mute`` and ``attention`` to the ``crosstalk`` app."""
    app.command("trust")(trust)
    app.command("mute")(mute)
    app.command("attention")(attention)
