"""A fresh home being linked connects with throwaway keys before it has an identity: the link's
handle is handed out again without asking for this home's keys, which it does not have yet."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
import trio.testing

from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import Daemon
from crosstalk.errors import NotSetUp
from crosstalk.paths import Home
from crosstalk.store.settings import RELAY_URL, set_setting
from tests.actors.fakes import running
from tests.actors.test_relay_link_fakes import URL, FakeRelay
from tests.actors.test_room_hold import BEN, room_store


async def test_the_link_started_with_throwaway_keys_is_handed_out_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """relay(as_keys=...) starts the link; relay() then returns the same handle (the keys are
    read only to start a link), while with no link yet it still says NotSetUp."""
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        async with room_store() as store, running(Supervisor(heartbeat=5.0)) as sup:
            await store.write(lambda conn: set_setting(conn, RELAY_URL, URL))
            daemon = Daemon(Home(Path(root)), store, sup, 5.0, features=(),
                            connect=FakeRelay().connect)
            with pytest.raises(NotSetUp):
                await daemon.relay()  # no identity, no link: nothing to connect as
            first = await daemon.relay(as_keys=BEN)
            assert await daemon.relay() is first
