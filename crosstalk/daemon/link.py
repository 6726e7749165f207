"""The daemon's relay link: started once there is an identity, restarted after ``link``, moved
to another relay while there are no rooms, and kept company by the local relay's keeper.

:class:`LinkKeeper` owns the link's supervisor entries (``relay_link``, ``local_relay``: the
dynamic kinds :data:`LINK` and :data:`LOCAL_RELAY`) and the handle the daemon's ops use. It is
the daemon's part, not an actor: it starts actors and reads their state through the supervisor
and the link's own ``statistics()``, which stays a plain read of a snapshot.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable

import trio

from crosstalk import crypto
from crosstalk.actors.children import DynamicKind
from crosstalk.actors.local_relay_keeper import LocalRelayKeeper
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import (
    Connector,
    LinkOutput,
    LinkStatus,
    LinkTimings,
    RelayLink,
    open_relay_socket,
)
from crosstalk.actors.relay_link_api import while_running
from crosstalk.actors.relay_link_store import SqliteLinkStore, device_id
from crosstalk.actors.room_reseal import resealer
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import RelayInUse
from crosstalk.hosting.local_relay import configured_relay, ensure_local_relay, is_local_default
from crosstalk.paths import RELAY_ENV
from crosstalk.store.db import Store
from crosstalk.store.rooms import list_rooms
from crosstalk.store.settings import RELAY_URL, get_setting, set_setting

log = logging.getLogger(__name__)

LINK = DynamicKind("relay_link", "Daemon.relay, once there is an identity (again after `link`)")
LOCAL_RELAY = DynamicKind("local_relay", "Daemon.relay, with no relay configured (one keeper)")


# This identity's keys, read when the link starts (NotSetUp before there is one).
Keys = Callable[[], crypto.Keys]


def _saved_relay(conn: sqlite3.Connection) -> str | None:
    saved = get_setting(conn, RELAY_URL)
    return saved if isinstance(saved, str) else None


class LinkKeeper:
    """Starts, restarts and moves the relay link; hands out its handle and its status."""

    def __init__(
        self,
        *,
        store: Store,
        supervisor: Supervisor,
        events: trio.MemorySendChannel[LinkOutput],
        timings: LinkTimings,
        posted: Callable[[float, float], None],
        connect: Connector | None = None,
        ring: Callable[[str], bool] | None = None,
    ) -> None:
        self._store = store
        self._supervisor = supervisor
        self._events = events  # the router's inbox: each link instance gets a clone
        self._timings = timings
        self._posted = posted
        self._ring = ring  # rings a running room's doorbell (Daemon.ring_room)
        # How the link opens its socket; the simulation (tests/sim) passes an in-memory relay,
        # and then no local relay process is started either.
        self._connect = connect
        self.store = SqliteLinkStore(store)
        self._link: RelayLink | None = None
        self._relay: RelayClient | None = None
        self._lock = trio.Lock()
        self._relays_started: list[int] = []  # embedded relays this daemon spawned (children)
        self._keeping_relay = False  # a LocalRelayKeeper actor runs (see _start)

    async def handle(self, keys: Keys) -> RelayClient:
        """The link's handle, starting it (and the local relay) with ``keys()`` if needed (read
        only then: a fresh home being linked has none of its own yet)."""
        async with self._lock:
            if self._relay is None:
                await self._start(keys())
            assert self._relay is not None
            return self._relay

    async def restart(self, keys: Keys) -> None:
        """Stop the link and start it again with ``keys()`` (after ``link``)."""
        async with self._lock:
            if self._relay is not None:
                await self._supervisor.stop_actor(LINK.name)
                self._relay = self._link = None
            await self._start(keys())

    async def move(self, url: str, keys: Keys) -> None:
        """Move this identity to the relay at ``url``, only while it has no rooms: rooms live
        on the relay they were made on, and moving would strand them."""
        current = configured_relay(await self._store.read(_saved_relay))
        if current == url:
            return
        if os.environ.get(RELAY_ENV):
            raise RelayInUse(
                f"CROSSTALK_RELAY is set to {current}, so this home cannot move to {url}."
            )
        if await self._store.read(list_rooms):
            raise RelayInUse(
                f"This identity's rooms live on the relay at {current}; pairing on {url} would "
                "strand them. Pair without --host, or use a fresh CROSSTALK_HOME."
            )
        await self._store.write(lambda conn: set_setting(conn, RELAY_URL, url))
        log.info("relay moved to %s", url)
        if self._relay is not None:
            await self.restart(keys)

    def status(self) -> LinkStatus | None:
        """Where the link stands; never connected while its actor is not running."""
        if self._link is None:
            return None
        return while_running(self._link.statistics(), self._supervisor.health(LINK.name))

    async def _start(self, keys: crypto.Keys) -> None:
        url = configured_relay(await self._store.read(_saved_relay))
        local = is_local_default(url) and self._connect is None
        if local:
            spawned = await trio.to_thread.run_sync(ensure_local_relay)
            if spawned is not None:
                self._relays_started.append(spawned)
        link = RelayLink(
            url=url,
            keys=keys,
            device=await device_id(self._store),
            store=self.store,
            events=self._events.clone(),
            timings=self._timings,
            connect=self._connect or open_relay_socket,
            reseal=resealer(self._store, keys),
            posted=self._posted,
            ring=self._ring,
        )
        inbox = await self._supervisor.start_actor(LINK.name, link, channel=link.mailbox)
        self._link = link
        self._relay = RelayClient(inbox, self._timings)
        if local and not self._keeping_relay:
            self._keeping_relay = True  # one keeper, whatever restarts the link
            keeper = LocalRelayKeeper(
                self.status, retry_now=self._retry_now, started=self._relays_started
            )
            await self._supervisor.start_actor(LOCAL_RELAY.name, keeper)

    def _retry_now(self) -> None:
        if self._relay is not None:
            self._relay.retry_now()
