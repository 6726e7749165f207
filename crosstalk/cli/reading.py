"""`crosstalk read`, without typer: agents run ``crosstalk read --json`` between turns.

Typer (and the click it vendors) is most of the CLI's start-up: about 30 ms of imports before a
command parses, on top of a bare interpreter's 40. ``read`` is an agent-facing command called
often, so :mod:`crosstalk.cli.entry` runs its plain forms (the options below, nothing else) here
directly, as it does for ``server`` and ``hook``; anything else (``--help``, a typo, a missing
value) goes to the typer app, whose ``read`` command calls :func:`read_messages` too, so both
print the same thing.
"""

from __future__ import annotations

import sys

from crosstalk.cli.calling import ask, show
from crosstalk.cli.output import run_reporting, visible
from crosstalk.client import call
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home

TYPE_CHECKING = False  # typing costs start-up time; only the type checker reads these
if TYPE_CHECKING:
    from typing import Any

ACK_TIMEOUT = 30.0
_FLAGS = {"--all": "all_messages", "--json": "json_output"}
_VALUES = {"--session": "session", "--home": "home"}


def plain_args(args: list[str]) -> dict[str, Any] | None:
    """The keyword arguments of :func:`read_messages` for ``args`` (after ``read``), or None
    when they are not a plain form (the typer app then answers, with its help or error)."""
    parsed: dict[str, Any] = {
        "all_messages": False, "session": None, "json_output": False, "home": None,
    }
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        name, eq, value = arg.partition("=")
        if arg in _FLAGS:
            parsed[_FLAGS[arg]] = True
        elif name in _VALUES and eq and value:
            parsed[_VALUES[name]] = value
        elif arg in _VALUES and rest and rest[0] and not rest[0].startswith("-"):
            parsed[_VALUES[arg]] = rest.pop(0)
        else:
            return None
    return parsed


def read_messages(
    *, all_messages: bool, session: str | None, json_output: bool, home: str | None
) -> None:
    """Show the messages waiting (all of them with ``all_messages``); once shown, mark them
    read. Raises CrosstalkError as the daemon refused."""
    reply = ask(home, "read", {"all": all_messages, "session": session})
    messages = reply["messages"]
    human = "\n\n".join(render(m) for m in messages) if messages else "No messages."
    show(json_output, {"messages": messages}, human)
    if reply.get("lease"):  # printed: only now are they read (and the senders told)
        try:
            call(Home.resolve(home), "ack", {"lease": reply["lease"]}, timeout=ACK_TIMEOUT)
        except CrosstalkError as exc:
            why = visible(exc.message)
            sys.stderr.write(f"crosstalk: not marked read ({why}); they show again.\n")


def main(kwargs: dict[str, Any]) -> int:
    """Run a plain ``read``; returns the exit status (as the typer command would exit)."""
    return run_reporting(lambda: read_messages(**kwargs), json_mode=kwargs["json_output"])


def render(message: dict[str, Any]) -> str:
    """One message for a person: who, in which room, what, its short id (which `answer` and
    `slice` take), and its thread when it is in one.

    The header is ours: the peer's names in it are kept to one line, and every line of their
    words is indented under it, so no newline they wrote draws a header of its own.
    """

    def one(value: object) -> str:
        return visible(str(value), one_line=True)

    short = one(message.get("short") or message["id"][:8])
    session = f" ({one(message['session'])})" if message.get("session") else ""
    room = f" in #{one(message['room'])}" if message.get("room") else ""  # a post: no room
    head = one(message["from"]) + session + room
    lines = [f"{head} · {one(message['kind'])} · {one(message['intent'])}  [{short}]"]
    if message.get("reply_to") or message.get("thread"):
        where = [f"reply to {one(message['reply_to'][:8])}"] if message.get("reply_to") else []
        where += [f"thread {one(message['thread'])}"] if message.get("thread") else []
        lines.append(f"  ({', '.join(where)})")
    lines.append("  " + str(message["text"]).replace("\n", "\n  "))
    lines += [
        f"  [slice {s['index']}] {one(s['kind'])}: {one(s['label'])} ({s['bytes']} bytes"
        + (", cut to the cap)" if s.get("truncated") else ")")
        + f" · crosstalk slice {short} {s['index']}"
        for s in message.get("slices", [])
    ]
    if message.get("kind") == "ask":
        lines.append(f"  answer with: crosstalk answer {one(message['from'])} {short} \"…\"")
    return "\n".join(lines)
