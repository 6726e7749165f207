"""The one way a command calls an op: None params left out, the directory sent when asked,
and with --json the reply's fields printed as the daemon sent them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from crosstalk.cli import calling


async def _serve(home: Path, reply: dict[str, Any], seen: list[dict[str, Any]], job: Any) -> Any:
    """Answer every request on ``home``'s socket with ``reply`` (``status`` with a pid), keep
    each request in ``seen``, and run ``job`` on a thread meanwhile; its result."""

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            request = b""
            while not request.endswith(b"\n"):
                request += await stream.receive_some(65536)
            parsed = json.loads(request)
            seen.append(parsed)
            line = {"pid": 1} if parsed["op"] == "status" else reply
            await stream.send_all(json.dumps({"ok": True, **line}).encode() + b"\n")

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(home / "daemon.sock"))
    sock.listen(4)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, answer, [trio.SocketListener(sock)])
            result = await trio.to_thread.run_sync(job)
            nursery.cancel_scope.cancel()
    return result


async def test_an_op_is_asked_without_its_none_params_and_with_the_directory(
    tmp_path: Path,
) -> None:
    """``ask`` leaves None params out (the op's defaults apply) and adds ``cwd`` with here."""
    seen: list[dict[str, Any]] = []

    def job() -> calling.Reply:
        return calling.ask(str(tmp_path), "facts", {"room": None, "all": True}, here=True)

    reply = await _serve(tmp_path, {"facts": []}, seen, job)
    assert reply == {"facts": []}
    assert seen[-1] == {"v": 1, "op": "facts", "all": True, "cwd": os.getcwd()}


async def test_run_prints_the_reply_as_sent_with_json_and_the_text_without(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --json the reply's fields are the output; without it, the command's own text."""
    seen: list[dict[str, Any]] = []
    reply = {"id": "m1", "state": "queued", "to": ["ben"], "truncated": []}

    def both() -> None:
        for json_output in (True, False):
            calling.run(str(tmp_path), "send", {"to": "ben", "text": "hi"},
                        json_output=json_output, human=lambda r: f"{r['state']}: {r['id']}")

    await _serve(tmp_path, reply, seen, both)
    printed, text = capsys.readouterr().out.splitlines()
    assert json.loads(printed) == reply
    assert text == "queued: m1"
