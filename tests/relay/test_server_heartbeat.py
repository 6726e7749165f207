"""The shell's heartbeat, on in-memory streams under the autojump clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing
from trio_websocket import WebSocketConnection, wrap_client_stream

from crosstalk.wire import relay as w
from relay.server import RelayServer, ShellTimings, _Link
from relay.storage import MemoryStorage

TIMINGS = ShellTimings(ping_interval=20.0, ping_timeout=10.0, close_timeout=3.0,
                       connect_timeout=5.0, tick_interval=3600.0)


def _server() -> RelayServer:
    return RelayServer(MemoryStorage(), b"\x07" * 32, timings=TIMINGS)


@asynccontextmanager
async def _challenged(server: RelayServer) -> AsyncIterator[WebSocketConnection]:
    """``server`` running, and a client connected to it that has its challenge (and answers
    pings as trio-websocket does); closed and stopped afterwards."""
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        nursery.start_soon(server.handle_stream, server_end)
        async with trio.open_nursery() as client:
            # trio-websocket annotates SocketStream but works over any trio Stream.
            ws = await wrap_client_stream(client, client_end, "relay", "/ws")  # type: ignore[arg-type]
            assert isinstance(w.decode_relay_frame(await ws.get_message()), w.Challenge)
            yield ws
            await ws.aclose()
        nursery.cancel_scope.cancel()


async def test_silent_peer_is_dropped_after_interval_plus_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer that stops answering is pinged at 20 s, dropped at 30 s, closed by 33 s."""
    server = _server()
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        nursery.start_soon(server.handle_stream, server_end)
        with trio.CancelScope() as client_scope:
            async with trio.open_nursery() as client:
                # trio-websocket annotates SocketStream but works over any trio Stream.
                ws = await wrap_client_stream(client, client_end, "relay", "/ws")  # type: ignore[arg-type]
                first = w.decode_relay_frame(await ws.get_message())
                assert isinstance(first, w.Challenge)
                client_scope.cancel()  # the client freezes: no reads, no pongs
        start = trio.current_time()
        assert server.core.statistics().connections == 1
        await trio.sleep(29.9)
        assert server.core.statistics().connections == 1
        await trio.sleep(0.2)
        assert server.core.statistics().connections == 0
        assert trio.current_time() - start < 33.0 + 0.2
        nursery.cancel_scope.cancel()


async def test_live_peer_answering_pings_stays_connected(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client whose WebSocket answers pings is kept for as long as it likes."""
    server = _server()
    async with _challenged(server):
        await trio.sleep(610.0)  # 30 pings answered; off the 20 s grid so none is in flight
        assert server.core.statistics().connections == 1


class _CountingServer(RelayServer):
    """Fails the heartbeat when it checks one link again and again at one instant (the spin a
    deadline compared two ways once caused) instead of letting it hang the test."""

    def __init__(self) -> None:
        super().__init__(MemoryStorage(), b"\x07" * 32, timings=TIMINGS)
        self.scheduled: dict[float, int] = {}

    def _schedule(self, link: _Link, now: float) -> None:
        self.scheduled[now] = self.scheduled.get(now, 0) + 1
        assert self.scheduled[now] < 100, f"the heartbeat spins at {now}"
        super()._schedule(link, now)


async def test_ping_deadline_met_exactly_is_due(autojump_clock: trio.testing.MockClock) -> None:
    """A link silent since 12.008 is pinged at 32.008 exactly, where ``32.008 - 12.008`` rounds
    below the 20 s interval (the sim's seed 101 hung the relay there before)."""
    assert (12.008 + 20.0) - 12.008 < 20.0  # the rounding this case needs
    server = _CountingServer()
    autojump_clock.jump(12.008)
    async with _challenged(server):
        await trio.sleep_until(40.0)
        assert server.core.statistics().connections == 1
        assert server.scheduled.get(32.008, 0) < 100
