"""`crosstalk send` and `crosstalk read`."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors
from crosstalk.client import call, ensure_daemon
from crosstalk.paths import Home

SEND_TIMEOUT = 30.0


@reports_errors
def send(
    to: Annotated[str, typer.Argument(help="Who: a person's name.")],
    text: Annotated[str, typer.Argument(help="The message.")],
    intent: Annotated[
        str, typer.Option("--intent", help="fyi (waits until they are idle), question, blocking.")
    ] = "fyi",
    thread: Annotated[str | None, typer.Option("--thread", help="Thread id.")] = None,
    reply_to: Annotated[str | None, typer.Option("--reply-to", help="Message id.")] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Send a message to someone you share a room with."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    ensure_daemon(h)
    reply = call(
        h,
        "send",
        {"to": to, "text": text, "intent": intent, "thread": thread, "reply_to": reply_to},
        timeout=SEND_TIMEOUT,
    )
    reply.pop("ok", None)
    out.emit(reply, f"{reply['state']}: to {', '.join(reply['to'])} ({reply['id']})")


def _render(message: dict[str, Any]) -> str:
    head = f"{message['from']}" + (f" ({message['session']})" if message.get("session") else "")
    return f"{head} · {message['intent']}\n  {message['text']}"


@reports_errors
def read(
    all_messages: Annotated[
        bool, typer.Option("--all", help="Include messages already read.")
    ] = False,
    session: Annotated[str | None, typer.Option("--session", help="As this session.")] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Show the messages waiting for you, and mark them read."""
    out = Output(json_mode=json_output)
    h = Home.resolve(home)
    ensure_daemon(h)
    reply = call(h, "read", {"all": all_messages, "session": session})
    messages = reply["messages"]
    human = "\n\n".join(_render(m) for m in messages) if messages else "No messages."
    out.emit({"messages": messages}, human)
