"""The ``crosstalk`` executable's entry point, with fast paths for the agent-facing commands.

``crosstalk server`` (the MCP server an agent launches) and ``crosstalk hook`` (run on every agent
event) are started by programs that wait for them, ``crosstalk read`` is what agents run between
turns, and ``crosstalk daemon run`` is every daemon start, so they skip the CLI's own imports
(typer and every command module) when called in their plain forms. Everything else goes to the
typer app.
"""

from __future__ import annotations

import sys


def _server_args(args: list[str]) -> tuple[bool, str | None, str]:
    """Whether ``args`` (after ``server``) is a plain form we can serve directly, with its home
    and tool profile (``--tools``, default ``full``)."""
    home: str | None = None
    tools = "full"
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            continue
        if arg in ("--home", "--tools") and rest and rest[0] and not rest[0].startswith("-"):
            value = rest.pop(0)
            if arg == "--home":
                home = value
            else:
                tools = value
        elif arg.startswith("--home=") and arg != "--home=":
            home = arg.partition("=")[2]
        elif arg.startswith("--tools="):
            tools = arg.partition("=")[2]
        else:
            return False, None, "full"
    return True, home, tools


def _daemon_run_args(args: list[str]) -> tuple[bool, bool, str | None] | None:
    """``(json, detach, home)`` when ``args`` (after ``daemon run``) is a plain form, else None."""
    json_output, detach, home = False, False, None
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--json":
            json_output = True
        elif arg == "--detach":
            detach = True
        elif arg == "--home" and rest and rest[0] and not rest[0].startswith("-"):
            home = rest.pop(0)
        elif arg.startswith("--home=") and arg != "--home=":
            home = arg.partition("=")[2]
        else:
            return None
    return json_output, detach, home


def _run_daemon(json_output: bool, detach: bool, home: str | None) -> int:
    """``crosstalk daemon run`` without typer: every daemon start (``ensure_daemon`` spawns one)
    would otherwise import typer and every command module before the daemon's own imports."""
    from crosstalk.cli.daemon_main import run_foreground
    from crosstalk.cli.output import Output, run_reporting
    from crosstalk.paths import Home

    return run_reporting(
        lambda: run_foreground(Home.resolve(home), Output(json_mode=json_output), detach=detach),
        json_mode=json_output,
    )


def main() -> None:
    """Console-script entry point."""
    args = sys.argv[1:]
    if args[:1] == ["server"]:
        plain, home, tools = _server_args(args[1:])
        if plain:
            from crosstalk.cli.serve_mcp import serve_mcp

            serve_mcp(home, tools)
            return
    # --help (and the CLI's own options) go to typer: the hook program's stdout is the client's
    # contract, so it would answer `--help` with `{}` and an error.
    if args[:1] == ["hook"] and not any(
        a in ("--help", "-h") or a.startswith(("--home", "--json")) for a in args
    ):
        from crosstalk.hook.main import main as hook_main

        hook_main(args[1:])
        return
    if args[:1] == ["read"]:
        from crosstalk.cli import reading

        read_args = reading.plain_args(args[1:])
        if read_args is not None:
            sys.exit(reading.main(read_args))
    if args[:2] == ["daemon", "run"]:
        daemon_args = _daemon_run_args(args[2:])
        if daemon_args is not None:
            sys.exit(_run_daemon(*daemon_args))
    from crosstalk.cli.main import main as cli_main

    cli_main()
