"""What the relay's shell keeps after a crowd of connections has gone."""

from __future__ import annotations

import pytest
import trio

from relay.limits import RelayConfig
from relay.server import RelayServer
from relay.storage import MemoryStorage
from relay.trim import Trimmer
from tests.relay.client import Identity, open_client

CROWD = 150


def test_memory_is_given_back_once_connections_fell_to_half_their_peak() -> None:
    """The trimmer fires when the connections fell to half their peak (by 64 at least), once,
    and again only after a new peak and fall."""
    trimmer = Trimmer(drop=64)
    seen = [trimmer.observe(n) for n in (10, 200, 150, 101, 100, 99, 40, 300, 150)]
    assert seen == [False, False, False, False, True, False, False, False, True]
    small = Trimmer(drop=64)
    assert not any(small.observe(n) for n in (50, 10, 0))  # a fall of less than 64


@pytest.mark.e2e
async def test_closed_connections_leave_no_heartbeat_entries_behind() -> None:
    """After a crowd connects and goes, the heartbeat keeps no entry (and so no link, socket
    or WebSocket) of theirs beyond a small slack."""
    server = RelayServer(MemoryStorage(), b"\x09" * 32, config=RelayConfig(max_per_source=1000))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.serve, "127.0.0.1", 0)
            async with open_client(port, Identity()) as stays:
                for _ in range(CROWD):
                    async with open_client(port, Identity()):
                        pass
                assert stays.resumed is not None
                with trio.fail_after(10):  # the relay's side of the last close, bounded
                    while True:
                        if len(server._links) == 1:
                            break
                        await trio.sleep(0.01)
                assert len(server._beats) <= 2 * len(server._links) + 64 < CROWD
            nursery.cancel_scope.cancel()
