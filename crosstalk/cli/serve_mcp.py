"""``crosstalk server`` started: the front end first, the SDK behind it (both entry paths)."""

from __future__ import annotations


def serve_mcp(home: str | None) -> None:
    """``crosstalk server``: the stdlib front end answers a client's opening requests at once
    (``initialize`` and ``tools/list``, or a modern ``server/discover``; see
    :mod:`crosstalk.mcp_front`) while the SDK imports, then the SDK takes the stream."""
    from crosstalk.mcp_front import start

    started = start()
    try:
        from crosstalk.mcp_server import serve_behind
        from crosstalk.paths import Home

        serve_behind(Home.resolve(home), started.front)
    finally:
        started.stop()
