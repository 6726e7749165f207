"""`crosstalk server` (the MCP server on stdio) and `crosstalk hook` (the hook program).

Both speak a protocol on stdout, not CLI output: ``--json`` is accepted for uniformity and
changes nothing. ``crosstalk-hook`` is the fast entry point for the hook; ``crosstalk hook`` is
the same program behind the CLI's (slower) imports, for clients configured that way.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Annotated

import typer

from crosstalk.cli.options import HomeOption, JsonOption, ToolsOption
from crosstalk.paths import HOME_ENV, Home

EventArgument = Annotated[
    str | None, typer.Argument(help="The event name, for clients that do not send one.")
]
ClientOption = Annotated[
    str | None, typer.Option("--client", help="The client: claude, codex, cursor, kimi, ...")
]


def server(
    tools: ToolsOption = "full", json_output: JsonOption = False, home: HomeOption = None
) -> None:
    """Run the MCP server on stdio (one per agent session); the daemon starts on first use."""
    del json_output  # stdout is the MCP stream
    from crosstalk.cli.serve_mcp import serve_mcp  # answers at once; imports the SDK behind

    serve_mcp(str(Home.resolve(home).root), tools)


def hook(
    event: EventArgument = None,
    client: ClientOption = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Answer one hook event in the client's own dialect (the client's JSON on stdin)."""
    del json_output  # stdout is the client's hook contract
    from crosstalk.hook.main import run

    started = time.monotonic()
    if home:
        os.environ[HOME_ENV] = home
    argv = [*(["--client", client] if client else []), *([event] if event else [])]
    text, status = run(argv, started)
    sys.stdout.write(text)
    sys.stdout.flush()
    raise typer.Exit(status)
