"""A device owed more than a connection's outbox holds gets all of it through the real shell:
the resume's replay goes a window at a time as the device acknowledges (relay.replay). Sent whole,
as before, the shell closed such a device as a slow consumer at every resume. In-memory streams
(every frame goes through the outbox) and an autojump clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from relay.server import RelayServer, ShellTimings
from relay.storage import MemoryStorage
from tests.relay.client import Identity, RelayClient, handshake, pair_and_room

TIMINGS = ShellTimings(ping_interval=600.0, ping_timeout=60.0, close_timeout=3.0,
                       connect_timeout=5.0, tick_interval=3600.0)
OUTBOX, OWED, ACK_EVERY = 100, 400, 20


@asynccontextmanager
async def _relay(window: int) -> AsyncIterator[tuple[RelayServer, trio.Nursery]]:
    config = RelayConfig(replay_window=window, op_burst=10_000.0)
    server = RelayServer(MemoryStorage(), b"\x07" * 32, config=config, timings=TIMINGS,
                         outbox=OUTBOX)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        yield server, nursery
        nursery.cancel_scope.cancel()


async def _connect(server: RelayServer, nursery: trio.Nursery, me: Identity) -> RelayClient:
    client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(server.handle_stream, server_end)
    ws: WebSocketConnection = await wrap_client_stream(
        nursery, client_end, "relay", "/ws"  # type: ignore[arg-type]
    )
    return await handshake(ws, me, "dev-1")


async def _catch_up(bob: RelayClient) -> list[int]:
    """Resume from 0 and read, acknowledging every ``ACK_EVERY`` ops, as a daemon commits and
    acknowledges; the seqs that came before the relay closed us or all were in."""
    seqs: list[int] = []
    try:
        with trio.fail_after(60):
            await bob.send(w.Resume(bob.next_req(), {"r": 0}))
            while len(seqs) < OWED:
                frame = await bob.recv()
                if isinstance(frame, w.Op):
                    seqs.append(frame.seq)
                    if len(seqs) % ACK_EVERY == 0:
                        await bob.send(w.Ack("r", frame.seq))
    except ConnectionClosed:
        pass
    return seqs


async def _owed_then_resumed(window: int) -> list[int]:
    async with _relay(window) as (server, nursery):
        ana, ben = Identity(), Identity()
        a = await _connect(server, nursery, ana)
        b = await _connect(server, nursery, ben)
        await a.ok(w.Resume(a.next_req(), {}))
        await b.ok(w.Resume(b.next_req(), {}))
        await pair_and_room(a, b, "r")
        await b.ws.aclose()
        for i in range(OWED):
            await a.ok(w.Post(a.next_req(), "r", f"op-{i}", b"%08d" % i))
        return await _catch_up(await _connect(server, nursery, ben))


async def test_a_device_owed_four_outboxes_gets_every_op_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seqs = await _owed_then_resumed(window=50)
    assert seqs == list(range(seqs[0], seqs[0] + OWED))


async def test_sent_whole_the_replay_overflows_the_outbox_and_the_device_is_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The check above can fail: with a window as large as the backlog (the replay of before),
    the relay closes the device as too slow before it has what it is owed."""
    seqs = await _owed_then_resumed(window=OWED)
    assert len(seqs) < OWED
