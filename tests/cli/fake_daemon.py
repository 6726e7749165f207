"""A fake daemon on a home's control socket, for in-process CLI tests of how a command prints
what the daemon answered (the real daemon's answers have their own tests)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.cli.test_error_walk import Ran, run


async def run_against(home: Path, replies: dict[str, list[dict[str, Any]]], args: list[str]) -> Ran:
    """Run ``crosstalk ARGS --home HOME`` in-process while a fake daemon answers each op with
    its lines (``status`` is answered for ``ensure_daemon``)."""
    lines = {"status": [{"pid": 1}], **replies}

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            request = b""
            while not request.endswith(b"\n"):
                request += await stream.receive_some(65536)
            for line in lines[json.loads(request)["op"]]:
                await stream.send_all(json.dumps({"ok": True, **line}).encode() + b"\n")

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(home / "daemon.sock"))
    sock.listen(4)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, answer, [trio.SocketListener(sock)])
            ran = await trio.to_thread.run_sync(run, [*args, "--home", str(home)])
            nursery.cancel_scope.cancel()
    (home / "daemon.sock").unlink()  # the next fake binds it again
    return ran
