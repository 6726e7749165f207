"""A ping that crosses the relay's close frame is no fault: trio-websocket answers it with a pong
wsproto refuses in the closing state, which used to end the connection's handler with an ERROR
("relay: connection handler failed") whenever a client's ping met the relay's close."""

from __future__ import annotations

import logging

import pytest
import trio
import trio.testing
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Event, Ping, Request

from relay.server import RelayServer, ShellTimings
from relay.storage import MemoryStorage

TIMINGS = ShellTimings(ping_interval=10.0, ping_timeout=5.0, close_timeout=3.0,
                       connect_timeout=5.0, tick_interval=3600.0)


async def _until(stream: trio.abc.Stream, ws: WSConnection, kind: type[Event]) -> list[Event]:
    events: list[Event] = []
    with trio.fail_after(60):
        while not any(isinstance(e, kind) for e in events):
            ws.receive_data(await stream.receive_some())
            events += list(ws.events())
    return events


async def _ping_after_close(server: RelayServer, nursery: trio.Nursery) -> list[Event]:
    """A raw client that answers no ping (a laptop asleep) is closed by the relay, and sends a
    ping only after the relay's close frame reached it, as a client whose pinger fired just as
    it woke would."""
    client, server_end = trio.testing.memory_stream_pair()
    handled = trio.Event()

    async def serve() -> None:
        await server.handle_stream(server_end)
        handled.set()

    nursery.start_soon(serve)
    ws = WSConnection(ConnectionType.CLIENT)
    await client.send_all(ws.send(Request(host="relay", target="/ws")))
    await _until(client, ws, AcceptConnection)
    ping = ws.send(Ping(b"late"))  # made while open: once the close is in, wsproto would refuse
    events = await _until(client, ws, CloseConnection)
    await client.send_all(ping)
    with trio.fail_after(60):  # the relay gives up on our close reply after close_timeout
        await handled.wait()
    return events


async def test_a_ping_that_crosses_the_relays_close_is_not_logged_as_a_failure(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock,
) -> None:
    server = RelayServer(MemoryStorage(), b"\x07" * 32, timings=TIMINGS)
    with caplog.at_level(logging.INFO):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            events = await _ping_after_close(server, nursery)
            nursery.cancel_scope.cancel()
    assert any(isinstance(e, Ping) for e in events), events  # closed for the pong we owed
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]
