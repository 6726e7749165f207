"""``crosstalk server`` started: the front end first, the SDK behind it (both entry paths)."""

from __future__ import annotations

import sys


def serve_mcp(home: str | None, tools: str = "full") -> None:
    """``crosstalk server``: the stdlib front end answers a client's opening requests at once
    (``initialize`` and ``tools/list``, or a modern ``server/discover``; see
    :mod:`crosstalk.mcp.front`) while the SDK imports, then the SDK takes the stream. ``tools``
    is the tool profile (:mod:`crosstalk.mcp.profiles`); an unknown one exits 2 with a ``usage``
    error on stderr before anything is served (stdout belongs to the MCP stream)."""
    from crosstalk.cli.output import Output
    from crosstalk.errors import UsageError
    from crosstalk.mcp.front import start

    try:
        started = start(tools=tools)
    except UsageError as exc:
        sys.exit(Output(json_mode=False).report(exc))
    try:
        from crosstalk.mcp.server import serve_behind
        from crosstalk.paths import Home

        serve_behind(Home.resolve(home), started.front)
    finally:
        started.stop()
