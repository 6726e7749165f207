"""The ``crosstalk`` command: a typer app whose commands each parse, then call one function.

Start-up cost matters here: every CLI call in the tests and every command a person types pays
it. Two things keep it low. The command modules import only what parsing needs (the standard
library, typer, the control client); anything heavy is imported inside the command that uses it,
and tests/cli/test_startup_imports.py holds that line. And typer turns every registered command
into a click command on each call (about 50 of them, each read with ``inspect.signature`` and
``typing.get_type_hints``), so when the arguments name one known command, :func:`app_for` hands
typer an app with only that command (or group) in it, and typer builds one.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from typer._click.core import Context  # typer vendors click (0.2x); its errors come from there
from typer._click.exceptions import NoArgsIsHelpError
from typer._click.exceptions import UsageError as ParseError
from typer.core import TyperGroup

from crosstalk.cli import (
    cmd_agent,
    cmd_backup,
    cmd_daemon,
    cmd_edits,
    cmd_guard,
    cmd_install,
    cmd_memory,
    cmd_messages,
    cmd_prune,
    cmd_relay,
    cmd_reserve,
    cmd_room,
    cmd_search,
    cmd_status,
    cmd_trust,
    cmd_ui,
)

HELP = "Put several people's coding agents in shared, end-to-end encrypted rooms."


class _Group(TyperGroup):
    """The top level: a malformed command line (a missing argument, an unknown option) is a
    ``usage`` error told like every other one, one sentence on stderr or the JSON envelope with
    ``--json``, exit 2 (CLI.md), instead of click's framed usage text."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        try:
            ctx = super().make_context(info_name, args, parent, **extra)
        except ParseError as exc:
            _usage(exc, json_mode="--json" in args)
        ctx.meta["crosstalk.json"] = "--json" in args
        return ctx

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except ParseError as exc:
            _usage(exc, json_mode=bool(ctx.meta.get("crosstalk.json")))


def _usage(exc: ParseError, *, json_mode: bool) -> NoReturn:
    """Report a command-line parse error as the ``usage`` error; help asked for stays help."""
    if isinstance(exc, NoArgsIsHelpError):
        raise exc
    from crosstalk.cli.output import Output
    from crosstalk.errors import UsageError

    where = exc.ctx.command_path if exc.ctx is not None else "crosstalk"
    sentence = f"{exc.format_message().rstrip('.')}; see `{where} --help`."
    raise typer.Exit(Output(json_mode=json_mode).report(UsageError(sentence)))


def _new_app() -> typer.Typer:
    return typer.Typer(
        name="crosstalk",
        cls=_Group,
        help=HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )


app = _new_app()
app.add_typer(cmd_daemon.app, name="daemon")
app.add_typer(cmd_relay.app, name="relay")
app.add_typer(cmd_room.app, name="room")
app.add_typer(cmd_guard.app, name="guard")
app.command("link")(cmd_room.link)
app.command("send")(cmd_messages.send)
app.command("read")(cmd_messages.read)
app.command("ask")(cmd_messages.ask)
app.command("answer")(cmd_messages.answer)
app.command("slice")(cmd_messages.slice_)
app.command("post")(cmd_messages.post)
app.command("watch")(cmd_messages.watch)
app.command("sent")(cmd_messages.sent)
app.command("thread")(cmd_messages.thread)
app.command("peers")(cmd_messages.peers)
app.command("rename")(cmd_messages.rename)
app.command("cost")(cmd_messages.cost)
app.command("edits")(cmd_edits.edits)
app.command("search")(cmd_search.search)
app.command("prune")(cmd_prune.prune)
app.command("status")(cmd_status.status)
app.command("doctor")(cmd_status.doctor)
app.command("secure")(cmd_status.secure)
app.command("backup")(cmd_backup.backup)
app.command("restore")(cmd_backup.restore)
app.command("demo")(cmd_status.demo)
app.command("ui")(cmd_ui.ui)
app.command("server")(cmd_agent.server)
app.command("hook")(cmd_agent.hook)
cmd_trust.mount(app)
cmd_install.mount(app)
cmd_memory.mount(app)
cmd_reserve.mount(app)


def _top_level() -> None:
    """The top level has no options of its own; this keeps a one-command app a group."""


def app_for(args: list[str]) -> typer.Typer:
    """The app to run for ``args``: only the command they name, or the whole app.

    The whole app answers anything that names no known command first (``--help``, no
    arguments, a typo), so its help and its "No such command" error are typer's own.
    """
    name = args[0] if args and not args[0].startswith("-") else None
    commands = [c for c in app.registered_commands if name is not None and c.name == name]
    groups = [g for g in app.registered_groups if name is not None and g.name == name]
    if not commands and not groups:
        return app
    lean = _new_app()
    lean.registered_commands = commands
    lean.registered_groups = groups
    # typer makes a lone command the program itself (`crosstalk --json` would run `read`); a
    # callback keeps the group, so `crosstalk read --json` parses exactly as in the whole app.
    lean.callback()(_top_level)
    return lean


def with_default_command(args: list[str]) -> list[str]:
    """``args`` with ``status`` put first when they name no command (CLI.md: bare ``crosstalk``
    is ``crosstalk status``; ``crosstalk --json`` and ``--home H`` too). ``--help`` stays help."""
    if not args or args[0] in ("--json", "--home") or args[0].startswith("--home="):
        return ["status", *args]
    return args


def main() -> None:
    """Console-script entry point."""
    args = with_default_command(sys.argv[1:])
    app_for(args)(args=args)
