"""``crosstalk search``: find what this identity holds (messages, facts, tasks, decisions,
closed threads) by words."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from crosstalk.cli.calling import ask, show
from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import reports_errors, visible

KINDS_HELP = "message, fact, task, decision or thread"


def _line(result: dict[str, Any]) -> str:
    """One result, one line: what peers wrote (the snippet, their name, a room's name) cannot
    start a line of its own or move the cursor; the matched words stand in [brackets]."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(result["ts"])))
    room = str(result["room"])
    where = f"#{room}" if room and room != "local" else room or "-"
    who = str(result["from"]) or "?"
    line = f"{when}  {result['kind']:<8}  {where}  {who}: {result['snippet']}  ({result['id']})"
    return visible(line, one_line=True)


@reports_errors
def search(
    query: Annotated[
        str, typer.Argument(help="Words to find (each must occur), or FTS5 syntax: "
                            '"a phrase", word*, a OR b, NEAR(a b).')
    ],
    room: Annotated[
        str | None, typer.Option("--room", help="Only this room (also one you left).")
    ] = None,
    person: Annotated[
        str | None, typer.Option("--from", help="Only what this person wrote (me: you).")
    ] = None,
    kind: Annotated[str | None, typer.Option("--kind", help=f"Only {KINDS_HELP}.")] = None,
    since: Annotated[
        float | None, typer.Option("--since", help="Only the last DAYS days.", metavar="DAYS")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Search the messages, facts, tasks, decisions and thread summaries you hold, best first."""
    params = {"query": query, "room": room, "from": person, "kind": kind, "since": since}
    show(json_output, *answer(ask(home, "search", params)))


INCOMPLETE = ("(The newest changes to facts, tasks and decisions were not searched: the disk "
              "is full.)")


def answer(reply: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """What ``--json`` prints (``incomplete`` only when true) and the human lines."""
    lines = [_line(r) for r in reply["results"]] or ["Nothing found."]
    shown: dict[str, Any] = {"results": reply["results"]}
    if reply.get("incomplete"):
        shown["incomplete"] = True
        lines.append(INCOMPLETE)
    return shown, "\n".join(lines)
