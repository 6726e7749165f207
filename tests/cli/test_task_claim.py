"""``crosstalk tasks claim``: a lost claim exits 1 with ``claimed_by_other`` naming the holder,
so ``crosstalk tasks claim ID && …`` is safe in a script (CLI.md); won and pending exit 0.

The daemon here is a fake on the home's control socket answering ``status`` and
``task_claim``; the CLI runs in-process."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.cli.test_error_walk import Ran, assert_clean_error, run


@pytest.fixture
def home() -> Iterator[Path]:
    """A short home (unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ct-claim-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def claim_against(home: Path, outcome: dict[str, Any], *args: str) -> Ran:
    """Run ``tasks claim t1 ARGS --home HOME`` against a daemon answering ``outcome``."""
    replies = {"status": {"pid": 1}, "task_claim": {"id": "t1", "room": "team", **outcome}}

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            request = b""
            while not request.endswith(b"\n"):
                request += await stream.receive_some(65536)
            reply = replies[json.loads(request)["op"]]
            await stream.send_all(json.dumps({"ok": True, **reply}).encode() + b"\n")

    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    await sock.bind(str(home / "daemon.sock"))
    sock.listen(4)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, answer, [trio.SocketListener(sock)])
            ran = await trio.to_thread.run_sync(
                run, ["tasks", "claim", "t1", *args, "--home", str(home)]
            )
            nursery.cancel_scope.cancel()
    (home / "daemon.sock").unlink()  # the next fake binds it again
    return ran


async def test_a_lost_claim_exits_1_with_claimed_by_other_naming_the_holder(home: Path) -> None:
    """Lost: exit 1, code claimed_by_other, the sentence names who holds it; human form too."""
    lost = {"outcome": "lost", "claimed_by": "ben"}
    ran = await claim_against(home, lost, "--json")
    assert_clean_error(ran, json_mode=True, code="claimed_by_other")
    assert "ben" in json.loads(ran.out)["error"]["message"]
    human = await claim_against(home, lost)
    assert_clean_error(human, json_mode=False, code="claimed_by_other")
    assert "ben" in human.err


@pytest.mark.parametrize("outcome", ["won", "pending"])
async def test_a_won_or_pending_claim_exits_0(home: Path, outcome: str) -> None:
    """Won and pending print the reply and exit 0."""
    ran = await claim_against(home, {"outcome": outcome, "claimed_by": "ana"}, "--json")
    assert ran.code == 0 and json.loads(ran.out)["outcome"] == outcome
