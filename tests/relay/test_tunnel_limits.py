"""Behind our own tunnel the per-address limits count the address the tunnel reports.

An in-process relay trusts ``Cf-Connecting-Ip`` (as ``relay serve --behind-tunnel`` does, on the
SQLite relay and on a NATS node alike: both are this shell). Every client reaches it from
127.0.0.1, as through a tunnel; the header alone tells them apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
from trio_websocket import ConnectionClosed, wrap_client_stream

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from relay.main import TUNNEL_ADDRESS_HEADER
from relay.server import RelayServer
from relay.storage import MemoryStorage
from tests.relay.client import Identity, RelayClient, handshake

pytestmark = pytest.mark.e2e

CONFIG = RelayConfig(max_per_source=2, slot_burst=1.0, slot_rate=0.0001, slot_work_bits=0)


@asynccontextmanager
async def tunnelled(port: int, client_address: str) -> AsyncIterator[RelayClient]:
    """An authenticated client whose tunnel reports ``client_address``."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    try:
        async with trio.open_nursery() as nursery:
            ws = await wrap_client_stream(
                nursery, stream, "127.0.0.1", "/ws",
                extra_headers=[(TUNNEL_ADDRESS_HEADER.encode(), client_address.encode())],
            )
            client = await handshake(ws, Identity(), "dev-1")
            yield client
            with trio.move_on_after(1) as scope:
                scope.shield = True
                await ws.aclose()
            nursery.cancel_scope.cancel()
    finally:
        await stream.aclose()


async def _closed(client: RelayClient) -> bool:
    """Whether the relay closed ``client`` (it answers a request otherwise)."""
    try:
        reply = await client.request(w.ListRooms(client.next_req()))
    except ConnectionClosed:
        return True
    assert isinstance(reply, w.RoomList)
    return False


async def test_connection_and_slot_limits_count_the_tunnels_client_address() -> None:
    """A third connection reported from one address sheds that address's idlest; another
    reported address keeps its connection and has its own slot budget."""
    server = RelayServer(MemoryStorage(), b"\x09" * 32, config=CONFIG,
                         client_address_header=TUNNEL_ADDRESS_HEADER)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve, "127.0.0.1", 0)
            async with tunnelled(port, "203.0.113.7") as first, \
                    tunnelled(port, "203.0.113.8") as other, \
                    tunnelled(port, "203.0.113.7") as second:
                assert not await _closed(second)  # second is now busier than first
                async with tunnelled(port, "203.0.113.7") as third:
                    assert await _closed(first)
                    assert not await _closed(second) and not await _closed(other)
                    opened = await third.request(w.SlotOpen(third.next_req()))
                    assert isinstance(opened, w.Slot)
                    refused = await second.request(w.SlotOpen(second.next_req()))
                    assert isinstance(refused, w.Error) and refused.code == "rate_limited"
                    assert isinstance(await other.request(w.SlotOpen(other.next_req())), w.Slot)
            nursery.cancel_scope.cancel()
