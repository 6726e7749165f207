"""The ``crosstalk`` command: a typer app whose commands each parse, then call one function."""

from __future__ import annotations

import typer

from crosstalk.cli import (
    cmd_agent,
    cmd_daemon,
    cmd_install,
    cmd_memory,
    cmd_messages,
    cmd_relay,
    cmd_room,
    cmd_status,
    cmd_trust,
)

app = typer.Typer(
    name="crosstalk",
    help="Put several people's coding agents in shared, end-to-end encrypted rooms.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(cmd_daemon.app, name="daemon")
app.add_typer(cmd_relay.app, name="relay")
app.add_typer(cmd_room.app, name="room")
app.command("link")(cmd_room.link)
app.command("send")(cmd_messages.send)
app.command("read")(cmd_messages.read)
app.command("ask")(cmd_messages.ask)
app.command("answer")(cmd_messages.answer)
app.command("slice")(cmd_messages.slice_)
app.command("post")(cmd_messages.post)
app.command("watch")(cmd_messages.watch)
app.command("sent")(cmd_messages.sent)
app.command("peers")(cmd_messages.peers)
app.command("rename")(cmd_messages.rename)
app.command("cost")(cmd_messages.cost)
app.command("status")(cmd_status.status)
app.command("doctor")(cmd_status.doctor)
app.command("secure")(cmd_status.secure)
app.command("demo")(cmd_status.demo)
app.command("server")(cmd_agent.server)
app.command("hook")(cmd_agent.hook)
cmd_trust.mount(app)
cmd_install.mount(app)
cmd_memory.mount(app)


def main() -> None:
    """Console-script entry point."""
    app()
