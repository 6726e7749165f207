"""`crosstalk reserve`, `release` and `reservations`: who is working on which files.

Paths are relative to the repository root wherever inside the repository the command runs, and
mean what git pathspecs with ``:(glob)`` mean (``src/auth/**``, ``*.md``). Everything a peer wrote
(names, reasons, paths) passes through :func:`visible` before it reaches the terminal.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from crosstalk.cli.calling import show
from crosstalk.cli.cmd_memory import (
    MEMORY_INCOMPLETE,
    NOT_FINAL,
    RoomOption,
    memory_notes,
    run_op,
)
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible
from crosstalk.errors import UsageError

PathsArgument = Annotated[
    list[str],
    typer.Argument(
        metavar="PATH_OR_GLOB…",
        help="Paths or globs relative to the repository root (src/auth/**, docs/*.md).",
        show_default=False,
    ),
]


def _left(until: float, now: float) -> str:
    minutes = max(0, round((until - now) / 60))
    clock = time.strftime("%H:%M", time.localtime(until))
    return f"until {clock} ({minutes} min left)"


@reports_errors
def reserve(
    paths: PathsArgument,
    minutes: Annotated[
        int, typer.Option("--for", metavar="MINUTES", help="How long it holds (1-1440).")
    ] = 60,
    shared: Annotated[
        bool, typer.Option("--shared", help="Others may hold it shared too; blocks exclusive.")
    ] = False,
    reason: Annotated[str, typer.Option("--reason", help="What you are doing there.")] = "",
    renew: Annotated[
        bool, typer.Option("--renew", help="Renew the reservation named by the one ID given.")
    ] = False,
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Reserve files of this repository, so other people's agents are told before they touch
    them (and the commit guard refuses their commits)."""
    if renew:
        if len(paths) != 1:
            raise UsageError("--renew takes exactly one reservation id.")
        reply = run_op("reserve_renew", {"id": paths[0], "minutes": minutes, "room": room}, home)
    else:
        params = {"paths": paths, "minutes": minutes, "shared": shared, "reason": reason,
                  "room": room}
        reply = run_op("reserve", params, home)
    show(json_output, reply, visible(answer_line(reply, time.time())))


def answer_line(reply: dict[str, Any], now: float) -> str:
    """What a reserve (or renewal) came to, in words: a pending one says why it is not final."""
    shown = ", ".join(reply["paths"])
    if reply.get("why_pending") == MEMORY_INCOMPLETE:
        return (f"pending: {reply['id']} ({shown}) is {reply['provisional']} for now in "
                f"{reply['room']}, {NOT_FINAL}")
    if reply["state"] == "pending":
        return (f"pending: {reply['id']} ({shown}) is on its way to {reply['room']}; the relay "
                "has not ordered it yet")
    kind = "shared" if reply["shared"] else "exclusive"
    return (f"{reply['state']}: {reply['id']} {shown} in {reply['repo']} ({kind}, "
            f"{_left(reply['until'], now)}, room {reply['room']})")


@reports_errors
def release(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[ID|PATH_OR_GLOB…]",
            help="Reservation ids or paths; none: all of yours in this repository.",
            show_default=False,
        ),
    ] = None,
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Give back reservations of yours."""
    reply = run_op("release", {"targets": targets or [], "room": room}, home)
    released: list[str] = reply["released"]
    lines = [f"released: {', '.join(released)}" if released else "You held nothing to release."]
    if reply["pending"]:
        lines.append(f"pending in: {', '.join(reply['pending'])}")
    show(json_output, reply, visible("\n".join(lines)))


@reports_errors
def reservations(
    room: RoomOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """List the reservations that hold in your rooms."""
    reply = run_op("reservations", {"room": room}, home)
    lines = [_line(item, reply["now"]) for item in reply["reservations"]]
    show(json_output, reply, "\n".join((lines or ["No reservations hold."]) + memory_notes(reply)))


def _line(item: dict[str, Any], now: float) -> str:
    who = "you" if item["mine"] else item["holder"]
    kind = "shared" if item["shared"] else "exclusive"
    why = f" — {item['reason']}" if item["reason"] else ""
    line = (f"{item['id']}  {who}: {', '.join(item['paths'])} in {item['repo']} ({kind}, "
            f"{_left(item['until'], now)}, #{item['room']}){why}")
    return visible(line, one_line=True)


def mount(app: typer.Typer) -> None:
    app.command("reserve")(reserve)
    app.command("release")(release)
    app.command("reservations")(reservations)
