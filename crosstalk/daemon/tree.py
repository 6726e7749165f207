"""The daemon's root: one per state directory, owning every actor and all durable state.

Start-up order (each step completes before the next; crosstalk/daemon/start.py runs it): refuse
damaged state files, start the supervisor and the control server behind its gate (it answers
``status`` while the rest starts), open the store and import this module, then :func:`bring_up`
plugs the features and starts :attr:`Daemon.children` in their declared order (the fan-out,
membership, the router, then the features' own actors in FEATURES order), then the relay link
when there is an identity, and the rooms; only then does the gate hand requests to the daemon's
ops. SIGTERM and SIGINT cancel the root nursery, which closes everything in reverse.

The actor tree is declared, not grown: :attr:`Daemon.children` is the table of child specs
(crosstalk.actors.children), each with its mailbox opened before anything starts, and
:attr:`Daemon.dynamic` names the kinds of child started on demand and who starts them.
docs/architecture.md draws both; tests/test_architecture_doc.py holds the two together.

:class:`Daemon` owns the identity, starts actors on demand (the relay link once an identity
exists, through crosstalk.daemon.link; a room actor per joined room) and hands out typed handles
on them. Neither features nor actors see it: features get :attr:`Daemon.caps` (a
crosstalk.daemon.caps.Granted), actors get channels, doorbells and those capabilities' moves.
"""

from __future__ import annotations

import functools
import logging
import subprocess
from collections.abc import Sequence
from typing import Any

import nacl.utils
import trio

from crosstalk import crypto
from crosstalk.actors.children import ChildSpec, DynamicKind, Mailbox, start_children
from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.fanout import FanOut, Subscriber
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import (
    Connector,
    LinkStatus,
    LinkTimings,
)
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.actors.room import RoomActor, RoomInput
from crosstalk.actors.room_send import SendOp
from crosstalk.actors.router import Router, RouterInput
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.latency import DaemonLatency
from crosstalk.core.room import Applied
from crosstalk.daemon.caps import Granted
from crosstalk.daemon.link import LINK, LOCAL_RELAY, LinkKeeper
from crosstalk.errors import CrosstalkError, NotSetUp, UnknownRoom
from crosstalk.features.caps import keys_of
from crosstalk.features.feature import Feature
from crosstalk.features.membership.actor import (
    MembershipActor,
    MembershipInput,
    membership_news,
)
from crosstalk.features.membership.lifecycle import reconcile_with_relay
from crosstalk.features.registry import FEATURES
from crosstalk.features.seams import Seams
from crosstalk.paths import Home
from crosstalk.store.db import Store
from crosstalk.store.identity import IdentityRecord, load_identity, new_identity, save_identity
from crosstalk.store.rooms import list_rooms, room_state
from crosstalk.wire.room_ops import RoomOp

log = logging.getLogger(__name__)

FANOUT_INBOX = 64
"""Committed batches the rooms may be ahead of the fan-out before a room's hand-off waits."""
LINK_ACTOR = LINK.name
"""The relay link actor's name under the supervisor."""
ROOMS = DynamicKind("room-<id>", "Daemon.room_inbox, one per joined room (first 8 hex digits)")


def _same(keys: crypto.Keys) -> crypto.Keys:
    return keys  # the throwaway keys a fresh home links with


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
        timings = LinkTimings(ping_interval=ping, ping_timeout=ping)
        # The daemon's own children's mailboxes, open before anything starts (see children).
        self._fanout_box = Mailbox[list[Applied]](FANOUT_INBOX)
        self._membership_box = Mailbox[MembershipInput](64)
        self._router_box = Mailbox[RouterInput](64)
        self.router = self._router_box.send
        self.membership = self._membership_box.send
        self._rooms: dict[str, trio.MemorySendChannel[RoomInput]] = {}
        self._doorbells: dict[str, Doorbell] = {}
        self._rooms_lock = trio.Lock()
        # Processes the daemon started for others to reach it (``--public`` tunnels).
        self.tunnels: list[subprocess.Popen[bytes]] = []
        self._identity_lock = trio.Lock()
        # The feature seams, built once from ``features`` in their order, before start().
        self.seams = Seams()
        self.ops = self.seams.ops  # before plugging: handlers may keep it to call other ops
        # p50/p99 over the last hour for ``status``: send -> posted (the relay link tells it)
        # and hook requests (timed by the op table).
        self.latency = DaemonLatency()
        # The relay link: its actor, its handle, its store, the local relay's keeper.
        self.link = LinkKeeper(
            store=store, supervisor=supervisor, events=self.router, timings=timings,
            posted=self.latency.send_posted.observe, connect=connect, ring=self.ring_room,
        )
        self.link_store = self.link.store
        # What every feature is given: its capabilities, never this object (daemon_caps).
        self.caps = Granted(self)
        for feature in features:
            self.seams.add(feature.name, feature.plug(self.caps))
        if self.ops.has("hook_event"):
            self.ops.time("hook_event", self.latency.hook.observe)
        # The actors it runs for its life, in the order they start (docs/architecture.md draws
        # this tree, "Inside the daemon"): its own three, then every feature's, in FEATURES order.
        self._own: tuple[ChildSpec[Any], ...] = (
            ChildSpec("fanout", self._fanout_actor, self._fanout_box),
            ChildSpec("membership", self._membership_actor, self._membership_box),
            ChildSpec("router", self._router_actor, self._router_box),
        )
        self.children = (*self._own, *self.seams.children)
        # The kinds of child started on demand, and by whom.
        self.dynamic: tuple[DynamicKind, ...] = (LINK, LOCAL_RELAY, ROOMS, *self.seams.spawns)

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

    # --- relay (crosstalk.daemon.link) -----------------------------------------------------------

    async def relay(self, *, as_keys: crypto.Keys | None = None) -> RelayClient:
        """The relay link's handle, starting the link (and the local relay) if needed.

        ``as_keys`` connects as a throwaway identity: a fresh home being linked to an existing
        identity needs a connection before it has keys of its own.
        """
        if as_keys is not None:
            return await self.link.handle(functools.partial(_same, as_keys))
        return await self.link.handle(functools.partial(keys_of, self))

    async def restart_link(self) -> None:
        """Stop the link and start it again with this identity's keys (after ``link``)."""
        await self.link.restart(functools.partial(keys_of, self))

    async def use_relay(self, url: str) -> None:
        """Move this identity to the relay at ``url`` (``--host``, or an invite that names one),
        only while it has no rooms (see crosstalk.daemon.link.LinkKeeper.move)."""
        await self.link.move(url, functools.partial(keys_of, self))

    def link_status(self) -> LinkStatus | None:
        """Where the link stands; never connected while its actor is not running."""
        return self.link.status()

    def adopt_identity(self, record: IdentityRecord) -> None:
        """Take on an identity that was just written to disk (by ``link``)."""
        self.identity = record

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
        inbox = await self.supervisor.start_actor(ROOMS.instance(room_id[:8]), actor)
        self._rooms[room_id] = inbox
        return inbox

    async def forget_room(self, room_id: str) -> None:
        """Stop a room's actor (we left it); its rows are the caller's to delete."""
        self._doorbells.pop(room_id, None)
        if self._rooms.pop(room_id, None) is not None:
            await self.supervisor.stop_actor(ROOMS.instance(room_id[:8]))

    async def _applied(self, applied: list[Applied]) -> None:
        """A room committed ``applied``: hand it to the fan-out and go on (waits only while the
        fan-out's inbox is full, when a BLOCK subscriber is far behind)."""
        await self._fanout_box.send.send(applied)

    def _fanout_actor(self) -> FanOut:
        subscribers = [
            Subscriber(getattr(listener, "__qualname__", repr(listener)), listener)
            for listener in self.seams.applied_listeners
        ] + self.seams.applied_subscribers
        return FanOut(subscribers)

    def _membership_actor(self) -> MembershipActor:
        # Given capabilities, as a feature is (it is one's actor), never this object.
        return MembershipActor(
            store=self.store,
            keys=functools.partial(keys_of, self.caps),
            relay=self.caps.relay,
            wake=self.caps.wake_room,
            reconcile=functools.partial(reconcile_with_relay, self.caps),
        )

    def _router_actor(self) -> Router:
        return Router(
            wake_room=self.caps.wake_room,
            membership=membership_news(self.membership.clone()),
            link_up=tuple(self.seams.link_up_listeners),
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

    def ring_room(self, room_id: str) -> bool:
        """Ring a running room's doorbell (the relay link, once it has recorded the room's ops);
        False, and nothing rung, when the room's actor is not running (the router starts it)."""
        doorbell = self._doorbells.get(room_id)
        if doorbell is None or room_id not in self._rooms:
            return False
        doorbell.ring()
        return True

    async def start(self) -> None:
        """Start the declared children in order (a feature's start hooks run after its own
        children, before the next feature's), then (with an identity) link and rooms."""
        await start_children(self.supervisor, self._own)
        for step in self.seams.start_steps:
            if isinstance(step, ChildSpec):
                await start_children(self.supervisor, (step,))
            else:
                await step()
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
    :func:`crosstalk.daemon.start.run_daemon`'s, which imports this module while the control
    socket already answers."""
    chosen = FEATURES if features is None else features
    daemon = Daemon(home, store, supervisor, heartbeat, features=chosen, connect=connect)
    await daemon.start()
    return daemon
