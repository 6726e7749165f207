"""The channel looks for notices when something arrives, not only at its sweep."""

from __future__ import annotations

from typing import Any

import trio

from crosstalk.errors import DaemonUnreachable
from crosstalk.mcp import channel


class _Daemon:
    """A stand-in daemon: one message arrives at ``arrives_at``; ``wait`` returns then."""

    def __init__(self, arrives_at: float, *, wait_works: bool = True) -> None:
        self.session = "s1"
        self.cwd = "/"
        self.transcript = None
        self.arrives_at = arrives_at
        self.wait_works = wait_works
        self.shown: list[tuple[float, list[str]]] = []

    async def call(self, op: str, params: dict[str, Any], *, limit: float = 10) -> Any:
        now = trio.current_time()
        if op == "wait":
            if not self.wait_works:
                raise DaemonUnreachable("The daemon is not running.")
            # As the daemon's: open until the next arrival (there is one) or the timeout.
            until = self.arrives_at if now < self.arrives_at else now + params["timeout"]
            await trio.sleep(until - now)
            return {"arrived": int(until == self.arrives_at)}
        if op == "notices":
            if now < self.arrives_at or self.shown:
                return {"notices": []}
            return {"notices": [{"id": "m1", "label": "ana", "kind": "message"}]}
        if op == "notice_shown":
            self.shown.append((now, params["ids"]))
            return {}
        raise AssertionError(op)

    async def call_until(self, op: str, params: dict[str, Any], key: str, *,
                         limit: float) -> Any:
        raise AssertionError(op)


async def _pushed_at(daemon: _Daemon) -> float:
    send, receive = trio.open_memory_channel[Any](10)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.push_notices, daemon, send)
        with trio.fail_after(10 * channel.SWEEP):
            await receive.receive()
        pushed = trio.current_time()
        nursery.cancel_scope.cancel()
    return pushed


async def test_an_arrival_is_pushed_at_once_not_at_the_next_sweep(autojump_clock: Any) -> None:
    daemon = _Daemon(arrives_at=0.3)
    pushed = await _pushed_at(daemon)
    assert pushed == 0.3  # the sweep would have looked at 1.0
    assert daemon.shown == [(0.3, ["m1"])]


async def test_without_a_wait_the_sweep_still_finds_it(autojump_clock: Any) -> None:
    """Planted: no ``wait`` answers (an older daemon, one restarting): the sweep pushes."""
    daemon = _Daemon(arrives_at=0.3, wait_works=False)
    pushed = await _pushed_at(daemon)
    assert pushed == channel.SWEEP
