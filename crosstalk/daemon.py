"""The daemon's root: one per state directory, owning every actor and all durable state.

Start-up order (each step completes before the next; crosstalk/daemon_start.py runs it): refuse
damaged state files, start the supervisor and the control server behind its gate (it answers
``status`` while the rest starts), open the store and import this module, then :func:`bring_up`
plugs the features and starts the fan-out, membership and the router, the feature actors, the
relay link when there is an identity, and the rooms; only then does the gate hand requests to
the daemon's ops. SIGTERM and SIGINT cancel the root nursery, which closes everything in reverse.

:class:`Daemon` is the one object the control ops talk to: it knows the identity, starts actors
on demand (the relay link once an identity exists, a room actor per room, a pairing actor per
pairing) and hands out typed handles on them. Actors never see it; they get channels.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
from collections.abc import Sequence
from typing import Any

import nacl.utils
import trio

from crosstalk import crypto
from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.fanout import FanOut, Subscriber
from crosstalk.actors.local_relay_keeper import LocalRelayKeeper
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import (
    Connector,
    LinkCommand,
    LinkStatus,
    LinkTimings,
    LinkUp,
    RelayLink,
    open_relay_socket,
)
from crosstalk.actors.relay_link_api import OutboxWrite, while_running
from crosstalk.actors.relay_link_store import SqliteLinkStore, device_id
from crosstalk.actors.room import RoomActor, RoomInput
from crosstalk.actors.room_inbound import inbound_applier
from crosstalk.actors.room_reseal import resealer
from crosstalk.actors.room_send import SendOp
from crosstalk.actors.router import MembershipNews, Router, RouterInput
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.latency import DaemonLatency
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError, NotSetUp, RelayInUse, UnknownRoom
from crosstalk.features.feature import Feature
from crosstalk.features.membership.actor import (
    MembershipActor,
    MembershipInput,
    membership_news,
)
from crosstalk.features.membership.lifecycle import reconcile_with_relay
from crosstalk.features.registry import FEATURES
from crosstalk.features.seams import Seams
from crosstalk.hosting.local_relay import configured_relay, ensure_local_relay, is_local_default
from crosstalk.paths import RELAY_ENV, Home
from crosstalk.store.db import Store
from crosstalk.store.identity import IdentityRecord, load_identity, new_identity, save_identity
from crosstalk.store.rooms import list_rooms, room_state
from crosstalk.store.settings import RELAY_URL, get_setting, set_setting
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import RoomOp

log = logging.getLogger(__name__)

FANOUT_INBOX = 64
"""Committed batches the rooms may be ahead of the fan-out before a room's hand-off waits."""
LINK_ACTOR = "relay_link"
"""The relay link actor's name under the supervisor."""


def _saved_relay(conn: sqlite3.Connection) -> str | None:
    saved = get_setting(conn, RELAY_URL)
    return saved if isinstance(saved, str) else None


class Daemon:
    """The running daemon's state and the handles its ops use."""

    def __init__(
        self,
        home: Home,
        store: Store,
        supervisor: Supervisor,
        heartbeat: float,
        *,
        features: Sequence[Feature] = FEATURES,
        connect: Connector | None = None,
    ) -> None:
        self.home = home
        # How the relay link opens its socket; the simulation (tests/sim) passes an in-memory
        # relay, and then no local relay process is started either.
        self._connect = connect
        self.store = store
        self.supervisor = supervisor
        self.heartbeat = heartbeat
        self.started_at = trio.current_time()
        self.identity: IdentityRecord | None = load_identity(home.identity)
        # The keys of ``identity``, derived once per record: deriving them (an Ed25519 keypair
        # from the seed, the X25519 public key) costs about 0.08 ms, and the appliers and
        # listeners ask for them once or more per op that arrives.
        self._keys: tuple[IdentityRecord, crypto.Keys] | None = None
        # The link beats on every pong, so a ping round must fit well inside one heartbeat.
        ping = min(LinkTimings().ping_interval, heartbeat / 4)
        self.timings = LinkTimings(ping_interval=ping, ping_timeout=ping)
        self.router: trio.MemorySendChannel[RouterInput] | None = None
        self.membership: trio.MemorySendChannel[MembershipInput] | None = None
        self._link: RelayLink | None = None
        self._relays_started: list[int] = []  # embedded relays this daemon spawned (children)
        self._keeping_relay = False  # a LocalRelayKeeper actor runs (see _start_link)
        self._relay: RelayClient | None = None
        self._rooms: dict[str, trio.MemorySendChannel[RoomInput]] = {}
        # The running room actors apply what arrives inside the link's own commit: an op is
        # received and held with one fsync, not two (crosstalk/actors/room_inbound.py).
        self._room_actors: dict[str, RoomActor] = {}
        self.link_store = SqliteLinkStore(store, apply_inbound=inbound_applier(self._room_actors))
        self._doorbells: dict[str, Doorbell] = {}
        self._rooms_lock = trio.Lock()
        self._fanout: trio.MemorySendChannel[list[Applied]] | None = None
        self._link_lock = trio.Lock()
        # Processes the daemon started for others to reach it (``--public`` tunnels).
        self.tunnels: list[subprocess.Popen[bytes]] = []
        self._identity_lock = trio.Lock()
        # The feature seams, built once from ``features`` in their order, before start().
        self.seams = Seams()
        self.ops = self.seams.ops  # before plugging: handlers may keep it to call other ops
        # p50/p99 over the last hour for ``status``: send -> posted (the relay link tells it)
        # and hook requests (timed by the op table).
        self.latency = DaemonLatency()
        for feature in features:
            self.seams.add(feature.name, feature.plug(self))
        if self.ops.has("hook_event"):
            self.ops.time("hook_event", self.latency.hook.observe)

    async def tell_local(self, applied: list[Applied]) -> None:
        """Hand arrivals that crossed no relay (a post, a me/SESSION, a decision's announcement)
        to the local listeners, as a room's arrivals go to the applied listeners."""
        await self.seams.tell_local(applied)

    async def feature_status(self) -> dict[str, Any]:
        """What each feature shows in ``status``, by feature name."""
        return await self.seams.status()

    # --- identity --------------------------------------------------------------------------------

    def require_identity(self) -> IdentityRecord:
        """This home's identity, or NotSetUp saying how to get one."""
        if self.identity is None:
            raise NotSetUp(
                "There is no identity here yet; pair with someone: `crosstalk room new`."
            )
        return self.identity

    def own_label(self) -> str:
        """The name we go by (the identity's label)."""
        return self.require_identity().label

    @property
    def keys(self) -> crypto.Keys:
        """This identity's keys (NotSetUp without one); derived again only when the identity
        record is replaced (created, linked)."""
        record = self.require_identity()
        if self._keys is None or self._keys[0] is not record:
            self._keys = (record, crypto.Keys(record.signing_seed, record.box_secret))
        return self._keys[1]

    async def ensure_identity(self, label: str | None) -> crypto.Keys:
        """The identity's keys, created (and committed to disk) on first use."""
        async with self._identity_lock:
            if self.identity is None:
                record = await trio.to_thread.run_sync(new_identity, label)
                await trio.to_thread.run_sync(save_identity, self.home.identity, record)
                self.identity = record
                log.info(
                    "identity created: %s",
                    crypto.Keys(record.signing_seed, record.box_secret).fingerprint,
                )
        return self.keys

    # --- relay -----------------------------------------------------------------------------------

    async def relay(self, *, as_keys: crypto.Keys | None = None) -> RelayClient:
        """The relay link's handle, starting the link (and the local relay) if needed.

        ``as_keys`` connects as a throwaway identity: a fresh home being linked to an existing
        identity needs a connection before it has keys of its own.
        """
        async with self._link_lock:
            if self._relay is None:
                await self._start_link(as_keys or self.keys)
            assert self._relay is not None
            return self._relay

    async def restart_link(self) -> None:
        """Stop the link and start it again with this identity's keys (after ``link``)."""
        async with self._link_lock:
            if self._relay is not None:
                await self.supervisor.stop_actor(LINK_ACTOR)
                self._relay = self._link = None
            await self._start_link(self.keys)

    async def use_relay(self, url: str) -> None:
        """Move this identity to the relay at ``url`` (``--host``, or an invite that names one).

        Only while it has no rooms: rooms live on the relay they were made on, and moving would
        strand them.
        """
        current = configured_relay(await self.store.read(_saved_relay))
        if current == url:
            return
        if os.environ.get(RELAY_ENV):
            raise RelayInUse(
                f"CROSSTALK_RELAY is set to {current}, so this home cannot move to {url}."
            )
        if await self.store.read(list_rooms):
            raise RelayInUse(
                f"This identity's rooms live on the relay at {current}; pairing on {url} would "
                "strand them. Pair without --host, or use a fresh CROSSTALK_HOME."
            )
        await self.store.write(lambda conn: set_setting(conn, RELAY_URL, url))
        log.info("relay moved to %s", url)
        if self._relay is not None:
            await self.restart_link()

    def adopt_identity(self, record: IdentityRecord) -> None:
        """Take on an identity that was just written to disk (by ``link``)."""
        self.identity = record

    async def _start_link(self, keys: crypto.Keys) -> None:
        assert self.router is not None
        url = configured_relay(await self.store.read(_saved_relay))
        if is_local_default(url) and self._connect is None:
            spawned = await trio.to_thread.run_sync(ensure_local_relay)
            if spawned is not None:
                self._relays_started.append(spawned)
        link = RelayLink(
            url=url,
            keys=keys,
            device=await device_id(self.store),
            store=self.link_store,
            events=self.router.clone(),
            timings=self.timings,
            connect=self._connect or open_relay_socket,
            reseal=resealer(self.store, keys),
            posted=self.latency.send_posted.observe,
        )
        inbox: trio.MemorySendChannel[LinkCommand] = await self.supervisor.start_actor(
            LINK_ACTOR, link
        )
        self._link = link
        self._relay = RelayClient(inbox, self.timings)
        if is_local_default(url) and self._connect is None and not self._keeping_relay:
            self._keeping_relay = True  # one keeper, whatever restarts the link
            keeper = LocalRelayKeeper(
                self.link_status, retry_now=self._retry_link_now, started=self._relays_started
            )
            await self.supervisor.start_actor("local_relay", keeper)

    def _retry_link_now(self) -> None:
        if self._relay is not None:
            self._relay.retry_now()

    def link_status(self) -> LinkStatus | None:
        """Where the link stands; never connected while its actor is not running."""
        if self._link is None:
            return None
        return while_running(self._link.statistics(), self.supervisor.health(LINK_ACTOR))

    # --- rooms -----------------------------------------------------------------------------------

    async def room_inbox(self, room_id: str) -> trio.MemorySendChannel[RoomInput] | None:
        """The actor of a room we know (started on first use); None for a room we don't."""
        inbox = self._rooms.get(room_id)
        if inbox is not None:
            return inbox
        async with self._rooms_lock:  # two callers must not both start the same room
            return await self._start_room(room_id)

    async def _start_room(self, room_id: str) -> trio.MemorySendChannel[RoomInput] | None:
        inbox = self._rooms.get(room_id)
        if inbox is not None:
            return inbox
        state = await self.store.read(lambda conn: room_state(conn, room_id))
        if state != "joined" or self.identity is None:
            return None  # unknown, or an invitation not yet accepted: nothing reaches us
        doorbell = self._doorbells.setdefault(room_id, Doorbell())
        doorbell.ring()  # catch up with whatever is in the store already
        actor = RoomActor(
            doorbell=doorbell,
            room_id=room_id,
            store=self.store,
            keys=self.keys,
            relay=await self.relay(),
            appliers=self.seams.appliers,
            on_applied=self._applied,
            scopes=self.seams.apply_scopes,
            key_takers=self.seams.key_takers,
        )
        inbox = await self.supervisor.start_actor(f"room-{room_id[:8]}", actor)
        self._rooms[room_id] = inbox
        self._room_actors[room_id] = actor
        return inbox

    async def forget_room(self, room_id: str) -> None:
        """Stop a room's actor (we left it); its rows are the caller's to delete."""
        self._doorbells.pop(room_id, None)
        self._room_actors.pop(room_id, None)
        if self._rooms.pop(room_id, None) is not None:
            await self.supervisor.stop_actor(f"room-{room_id[:8]}")

    async def _applied(self, applied: list[Applied]) -> None:
        """A room committed ``applied``: hand it to the fan-out and go on (waits only while the
        fan-out's inbox is full, when a BLOCK subscriber is far behind)."""
        assert self._fanout is not None, "rooms start after the fan-out"
        await self._fanout.send(applied)

    async def _start_fanout(self) -> None:
        subscribers = [
            Subscriber(getattr(listener, "__qualname__", repr(listener)), listener)
            for listener in self.seams.applied_listeners
        ] + self.seams.applied_subscribers
        self._fanout = await self.supervisor.start_actor(
            "fanout", FanOut(subscribers), inbox_size=FANOUT_INBOX
        )

    async def send_op(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None, epoch: int | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        """Seal ``op`` for ``room_id`` (under the current key, or ``epoch``'s) and commit it to
        the outbox, with ``also`` and the features' sent writers in that transaction; returns
        its op id."""
        inbox = await self.room_inbox(room_id)
        if inbox is None:
            raise UnknownRoom(f"There is no room {room_id!r} here; `crosstalk room` lists yours.")
        op_id = op_id or nacl.utils.random(16).hex()
        send, receive = trio.open_memory_channel[str | CrosstalkError](1)
        async with receive:
            also = self.seams.outbox_write(room_id, op_id, op, also)
            await inbox.send(SendOp(op_id, op, send, epoch, also))
            answer = await receive.receive()
        if isinstance(answer, CrosstalkError):
            raise answer
        for listener in self.seams.sent_listeners:
            await listener(room_id, answer, op)
        return answer

    async def wake_room(self, room_id: str) -> None:
        """Make a room's actor look at the store again (an op was committed for it, or its
        roster or keys changed). Starts the actor if needed; never blocks on a busy room and is
        never lost (the room's doorbell is level-triggered and outlives the actor's restarts)."""
        if await self.room_inbox(room_id) is not None:
            self._doorbells[room_id].ring()

    def _relay_news(self) -> MembershipNews:
        """What the router tells of the relay's news: all of it to the membership actor, and
        each link-up to the features' link-up listeners too."""
        assert self.membership is not None
        membership = membership_news(self.membership.clone())

        async def tell(news: w.Roster | w.RoomGone | LinkUp) -> None:
            await membership(news)
            if isinstance(news, LinkUp):
                for listener in self.seams.link_up_listeners:
                    await listener(news.rooms)

        return tell

    async def start(self) -> None:
        """Start the fan-out of applied ops, membership and the router, the feature actors,
        then (with an identity) link and rooms."""
        await self._start_fanout()
        self.membership = await self.supervisor.start_actor(
            "membership",
            MembershipActor(
                store=self.store,
                keys=lambda: self.keys,
                relay=self.relay,
                wake=self.wake_room,
                reconcile=lambda beat, within: reconcile_with_relay(self, beat, within),
            ),
            inbox_size=64,
        )
        router = Router(wake_room=self.wake_room, membership=self._relay_news())
        self.router = await self.supervisor.start_actor("router", router, inbox_size=64)
        for hook in self.seams.start:
            await hook()
        if self.identity is not None:
            try:
                await self.relay()
            except CrosstalkError as exc:
                # Local posts, reads and status keep working; commands that need the relay
                # will try again and say why it fails.
                log.warning("relay link not started: %s", exc.message)
                return
            for room in await self.store.read(list_rooms):
                if room.state == "joined":
                    await self.room_inbox(room.room_id)


async def bring_up(
    home: Home,
    store: Store,
    supervisor: Supervisor,
    *,
    heartbeat: float,
    features: Sequence[Feature] | None = None,
    connect: Connector | None = None,
) -> Daemon:
    """Plug ``features`` (:data:`FEATURES` by default) into a daemon on ``store`` and start its
    actors under ``supervisor``; returns it once its ops can be served.

    The process around it (the lock, the control socket, the store, signals) is
    :func:`crosstalk.daemon_start.run_daemon`'s, which imports this module while the control
    socket already answers."""
    chosen = FEATURES if features is None else features
    daemon = Daemon(home, store, supervisor, heartbeat, features=chosen, connect=connect)
    await daemon.start()
    return daemon
