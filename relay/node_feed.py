"""The feed of a stateless relay node: its core is a cache of the stream, kept in step with
what the other nodes stored.

Theory of operation
-------------------
:class:`FedServer` is the ordinary shell (:class:`~relay.server.RelayServer`) whose core's rooms,
slots and grants are a cache of the stream (see :mod:`relay.nats_store`); the request path on
top of it is :mod:`relay.node`, presence :mod:`relay.node_presence`.

Writes of other nodes reach this node through the stream's RePublish (``N.p.>``), which sends
only what was stored, on the node's Trio NATS client (:mod:`relay.nats_conn`). Every node takes
in everything but ops (membership, cursors, devices, prune floors, slots, grants: rare, and any
node may need them, an invitation say); a room's ops (``N.p.r.<room>.o``) only a node that
*follows* the room, which it does while an identity connected to it is in the room (invited or
joined): its hello, an invitation or a write made here starts following, the last such
connection's close ends it. Taking in an op a node has no client for cost it about as much CPU as
deciding one. The cached log of a room not followed falls behind, so following starts with a
reload, sent on the same connection after the subscription (the server has the subscription
before it reads the stream: each op is in the reload, in the feed or in both, and the feed drops
what the reload took in); a write decided on a room not followed subscribes first, and if it
wins its compare-and-set the cache held all before it. A hello waits for the reloads of its
identity's rooms, so a new device's cursors and the resume after it see the stream as it is.
A membership message of a room not followed shows a gap (its ops were not taken in) and has the
room reloaded, which tells a new invitee here of the invitation. The client's reader
takes each message in at once, in its callback (nothing there blocks), unless older ones wait
for the feeder task (a reconnect's reload, presence), behind which it queues: in order either
way, and all the messages of one read of the socket in one scheduling round, not a feeder wake
more. The echo of this node's own writes (the RePublish sends them here too, often before
the write's own reply) is dropped on its subject and ``Nats-Sequence`` header alone, at once or
when the write's unit is released, before the rest of the headers is parsed: the node applied
those writes already. A
message for a unit carries the sequence it was checked against; if that is not what this node
last saw of the unit, something was missed and the unit is reloaded; otherwise the core applies
it and pushes it to its own connections (:mod:`relay.replica`). While a unit is being written or
reloaded here (it is *busy*), its messages wait in a buffer and are applied, in stream order,
when it is released. A unit whose
cache may disagree with the stream (a write whose outcome is unknown, a reload that failed) is
*stale* and reloaded before anything is decided on it; a failed reload is retried in the
background with backoff. After a reconnect to NATS every cached unit is reloaded: what was
republished meanwhile is lost (core NATS). The feed's subscription starts after the node loaded
the stream, so at start the same holds if the stream moved on between the two.
"""

from __future__ import annotations

import collections
import logging
import secrets

import attrs
import trio
from nacl.signing import SigningKey

from crosstalk.errors import RemoteProtocolError, StorageUnavailable, UsageError
from crosstalk.logs import repeats_from_env
from crosstalk.sim_hooks import probe
from relay import nats_wire as wire
from relay.effects import Close, Effect, Send
from relay.limits import RelayConfig
from relay.nats_store import NatsStorage
from relay.replica import Gap
from relay.server import RelayServer, ShellTimings
from relay.storage import OpsPruned

log = logging.getLogger(__name__)

RELOAD_BACKOFF = 0.25  # seconds before retrying a failed reload, doubling ...
RELOAD_BACKOFF_MAX = 4.0  # ... up to this


@attrs.frozen
class _Feed:
    seq: int
    subject: str
    headers: bytes  # the raw block, parsed only for a message that is applied
    data: bytes


class FedServer(RelayServer):
    """The ordinary shell with a core that caches the stream and takes in other nodes' writes."""

    def __init__(
        self, storage: NatsStorage, signing_key_seed: bytes, *, config: RelayConfig | None = None,
        timings: ShellTimings | None = None, node: str | None = None,
        client_address_header: str | None = None,
    ) -> None:
        public = bytes(SigningKey(signing_key_seed).verify_key)
        if storage.ensure_key(public) != public:
            raise UsageError(
                "This node's relay key differs from the one the cluster recorded; copy relay.key "
                "from a running node."
            )
        self.nats = storage
        self.node = node or secrets.token_hex(4)
        self._inbox: collections.deque[_Feed] = collections.deque()
        self._arrived = trio.Event()
        self._committing = False  # the committer is storing a batch whose frames wait
        self._busy: dict[str, list[_Feed]] = {}
        self._locks: dict[str, trio.Lock] = {}
        # Units whose cache may hold what the stream does not (a write whose outcome is unknown)
        # or miss what it does (a failed reload): reloaded before anything is decided on them.
        self._stale: set[str] = set()
        self._nursery: trio.Nursery | None = None
        self.conflicts = 0
        self.echoes = 0  # this node's own writes come back through RePublish: dropped unparsed
        self.reloading = 0  # reloads started in the background and not yet done
        # A unit retried while NATS cannot answer fails the same way every few seconds: said
        # once per reason, then summarised, until it reloads.
        self._reload_failing = repeats_from_env()
        # Rooms whose ops this node takes in (room -> subscription id): those a local identity
        # is in. The cached log and head of any other room may be behind the stream.
        self._followed: dict[str, str] = {}
        # Identities whose hello is being handled: their rooms are followed before the hello
        # is, and must not be unfollowed meanwhile (they are not connected here yet).
        self._arriving: collections.Counter[str] = collections.Counter()
        self._subscribe()  # sent when the node's NATS client connects, in run
        storage.on_reconnect = self._poke_resync
        super().__init__(storage, signing_key_seed, config=config, timings=timings,
                         client_address_header=client_address_header)
        # The last stream seq this node has taken in, in order: its load, then its feed.
        self.fed_through = storage.loaded_through
        storage.end_startup()  # from here on the node's own connection does everything
        self.core.limit_pruning(self._prunable)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self.nats.run_connection)
            nursery.start_soon(self._feeder)
            await self._catch_up()
            await nursery.start(super().run)
            task_status.started()

    async def _catch_up(self) -> None:
        """The feed began after the load: if the stream moved on in between, what was stored
        then never reaches the feed, so every unit is reloaded as after a reconnect."""
        try:
            last = await self.nats.last_sequence()
        except StorageUnavailable as exc:
            log.warning("relay node %s: cannot read the stream's head: %s", self.node, exc)
            last = self.fed_through + 1
        if last > self.fed_through:
            probe("node.feed_caught_up_after_restart")
            self._poke_resync()

    # --- taking messages in -------------------------------------------------------------------

    def _subscribe(self) -> None:
        lay = self.nats.layout
        cut = len(lay.republished) + 1
        root = f"{lay.root}."

        def stored(msg: wire.Msg) -> None:
            raw = msg.headers or b""
            try:
                seq = int(wire.header_value(raw, b"Nats-Sequence") or 0)
            except ValueError:
                seq = 0
            item = _Feed(seq, root + msg.subject[cut:], raw, msg.payload)
            if self._inbox:  # behind what waits for the feeder, in order
                self._inbox.append(item)
                self._poke()
            else:
                self._take(item)

        def presence(msg: wire.Msg) -> None:
            self._inbox.append(_Feed(-1, msg.subject, b"", msg.payload))
            self._poke()

        self._on_stored = stored
        # Everything but ops reaches every node (rare, and any node may need it: an invitation,
        # a device, a slot); a room's ops only the nodes that follow it (_follow).
        for rest in ("r.*.m", "c.>", "f.*", "d.>", "slot.>", "grant.>"):
            self.nats.conn.subscribe(f"{lay.republished}.{rest}", stored)
        self.nats.conn.subscribe(f"{lay.ns}.presence.*", presence)

    # --- which rooms' ops come here -----------------------------------------------------------

    def _here(self) -> set[str]:
        """The identities connected here, or saying hello."""
        return self.core.identities() | self._arriving.keys()

    def _wants(self, room: str, here: set[str]) -> bool:
        """Whether one of ``here`` is in ``room`` (invited or joined)."""
        state = self.core._rooms.rooms.get(room)
        return state is not None and any(fp in here for fp in state.members)

    def _follow(self, room: str) -> bool:
        """Subscribe to ``room``'s ops; True if it was not followed (the caller then reloads
        it: what was stored before the subscription never comes through the feed). The reload
        goes out on the same connection after the SUB, so the server has the subscription
        before it reads the stream: every op is in the reload or in the feed, or both (the feed
        drops what the reload took in)."""
        if room in self._followed:
            return False
        subject = f"{self.nats.layout.republished}.r.{room}.o"
        self._followed[room] = self.nats.conn.subscribe(subject, self._on_stored)
        return True

    def _follow_if_wanted(self, unit: str) -> None:
        """After ``unit``'s membership changed here: if an identity connected here is now in
        the room and its ops are not followed, follow them and reload the room."""
        room = unit[2:]
        if (unit.startswith("r.") and room not in self._followed
                and self._wants(room, self._here())):
            self._follow(room)
            self._start_reload(unit)

    async def _follow_rooms_of(self, fp: str) -> bool:
        """Before an identity's hello: follow every room it is in and reload those not
        followed yet, so the hello (a new device's cursors start at each head) and the resume
        after it see the stream as it is; False if NATS did not answer."""
        self._arriving[fp] += 1
        rooms = sorted(self.core._rooms.member_of.get(fp, ()))
        fresh = [room for room in rooms if self._follow(room)]
        for room in fresh:
            async with self._lock(f"r.{room}"):
                if not await self._reload_busy(f"r.{room}"):
                    return False
        return True

    def _arrived_done(self, fp: str) -> None:
        self._arriving[fp] -= 1
        if self._arriving[fp] <= 0:
            del self._arriving[fp]

    def _unfollow_idle(self) -> None:
        """Stop taking in the ops of rooms no identity connected here is in."""
        here = self._here()
        for room in [r for r in self._followed if not self._wants(r, here)]:
            self.nats.conn.unsubscribe(self._followed.pop(room))

    def _poke(self) -> None:
        """Wake the feeder (in the NATS client's reader task; never blocks)."""
        self._arrived.set()

    def _poke_resync(self) -> None:
        """After a reconnect: what was republished while this node was away is lost (core
        NATS), and a unit written last in that time would show no gap, so every unit this node
        knows is reloaded."""
        self._inbox.append(_Feed(-2, "", b"", b""))
        self._poke()

    async def _feeder(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived = trio.Event()
            while self._inbox:
                item = self._inbox.popleft()
                if item.seq == -2:
                    self._resync()
                elif item.seq < 0:
                    self._heard(item.data)
                else:
                    self._take(item)
            await trio.lowlevel.checkpoint()

    def _take(self, item: _Feed) -> None:
        """Take in one stored message, in stream order."""
        self.fed_through = max(self.fed_through, item.seq)
        self._stored(item)

    def _heard(self, data: bytes) -> None:
        """Another node's presence announcement (:mod:`relay.node_presence`)."""

    def _stored(self, item: _Feed) -> None:
        unit = self.nats.layout.unit_of_subject(item.subject)
        if unit is not None:
            # Tested on the subject and sequence alone, before anything is parsed: the
            # RePublish brings this node's own writes back too (often before the write's own
            # reply, while its unit is busy), and they were applied when they were decided.
            if unit in self._busy:
                self._busy[unit].append(item)
                return
            if item.seq <= self.nats.tails.last.get(unit, 0):
                self.echoes += 1  # this node's own write, or one it reloaded already
                return
        try:
            headers = wire.parse_headers(item.headers).fields if item.headers else {}
            stored = self.nats.layout.decode(item.subject, headers, item.data)
        except (KeyError, ValueError, TypeError, RemoteProtocolError, wire.NatsProtocolError):
            log.warning("relay node %s: dropped a malformed stored message %s", self.node,
                        item.subject)
            return
        if stored is None:
            return
        if stored.unit is None:  # a cursor, device or prune floor: newest wins
            self._deliver(self.core.stored_elsewhere(stored.writes, stored.by))
            for x in stored.writes:
                if isinstance(x, OpsPruned):
                    self.nats.tails.pruned(x.room, x.through)
            return
        last = self.nats.tails.last.get(stored.unit, 0)
        if headers.get("Nats-Expected-Last-Subject-Sequence") != str(last):
            probe("node.feed_gap_reloaded")  # a write of the unit never reached this node
            self._start_reload(stored.unit)
            return
        try:
            effects = self.core.stored_elsewhere(stored.writes, stored.by)
        except Gap:
            self._start_reload(stored.unit)
            return
        self.nats.tails.saw(item.seq, stored)
        self._deliver(effects)
        if not item.subject.endswith(".o"):
            self._follow_if_wanted(stored.unit)

    def _deliver(self, effects: list[Effect]) -> None:
        """Send what another node's write means here. Frames alone go out at once unless
        something queued before them still waits for the committer (they must not overtake
        it): gathering a batch there takes several scheduling rounds, which cost more than
        the push itself, and there is nothing to commit."""
        if not effects:
            return
        if self._pending or self._committing or not all(isinstance(e, Send | Close)
                                                        for e in effects):
            self._feed(effects)
        else:
            self._dispatch(effects)

    def _resync(self) -> None:
        log.info("relay node %s: reconnected to NATS; reloading what it caches", self.node)
        for unit in list(self.nats.tails.last):
            if unit not in self._busy:
                self._start_reload(unit)

    # --- reloads ------------------------------------------------------------------------------

    def _start_reload(self, unit: str) -> None:
        self._busy.setdefault(unit, [])
        assert self._nursery is not None
        self.reloading += 1
        self._nursery.start_soon(self._reload_task, unit)

    async def _reload_task(self, unit: str) -> None:
        """Reload ``unit`` until it works (NATS may be electing a leader), its stored messages
        waiting meanwhile; a unit left stale would push nothing until its next write."""
        delay = RELOAD_BACKOFF
        try:
            while True:
                async with self._lock(unit):
                    self._busy.setdefault(unit, [])
                    try:
                        await self._reload(unit)
                        if self._reload_failing.cleared(unit) is not None:
                            log.info("relay node %s: reloaded %s", self.node, unit)
                        return
                    except StorageUnavailable as exc:
                        self._cannot_reload(unit, exc)
                    finally:
                        if unit not in self._stale:
                            self._release([unit])
                await trio.sleep(delay)  # back off while NATS cannot answer
                delay = min(delay * 2, RELOAD_BACKOFF_MAX)
        finally:
            self.reloading -= 1

    async def _reload(self, unit: str) -> None:
        """Replace the cache of ``unit`` with what the stream holds now (caller holds it busy)."""
        self._stale.add(unit)
        snapshot, tails = await self.nats.areload(unit)
        self._stale.discard(unit)
        self.nats.tails.last[unit] = tails.last.get(unit, 0)
        if unit.startswith("r."):
            self.nats.tails.ops[unit[2:]] = tails.ops.get(unit[2:], {})
        self._deliver(self.core.reload(unit, snapshot))
        self._follow_if_wanted(unit)

    def _release(self, units: list[str]) -> None:
        """Stop buffering ``units``' stored messages and apply what waited."""
        waiting: list[_Feed] = []
        for unit in units:
            waiting.extend(self._busy.pop(unit, []))
        for item in sorted(waiting, key=lambda i: i.seq):
            self._stored(item)

    async def _reload_busy(self, unit: str) -> bool:
        self._busy.setdefault(unit, [])
        try:
            await self._reload(unit)
            return True
        except StorageUnavailable:
            return False
        finally:
            self._release([unit])

    def _cannot_reload(self, unit: str, exc: StorageUnavailable) -> None:
        say = self._reload_failing.seen(unit, str(exc), trio.current_time())
        if say is not None:
            log.warning("relay node %s: cannot reload %s: %s%s", self.node, unit, exc, say.note)

    async def _reload_all(self, units: list[str]) -> bool:
        """Reload ``units``; a unit that fails stays stale and is retried in the background."""
        done = True
        for unit in units:
            try:
                await self._reload(unit)
            except StorageUnavailable as exc:
                self._cannot_reload(unit, exc)
                self._start_reload(unit)
                done = False
        return done

    def _prunable(self, room: str) -> int:
        """The highest seq of ``room`` this node may prune for acknowledgement: ops it has
        taken in from the feed. A device that said hello on another node before an op was
        stored is stored before it, so it is known here once the op came through the feed;
        pruning an op this node only wrote (or reloaded) could drop what that device is owed.
        What is held back now is pruned at a later acknowledgement."""
        ops = self.nats.tails.ops.get(room)
        if not ops:
            return 1 << 62
        fed = self.fed_through
        # A room's seqs and their stream seqs rise together (its compare-and-set orders both),
        # so the ops taken in are a prefix, and any of them bounds it safely; they are held in
        # the order they were stored, so the newest taken in is found from the end, past the
        # few still in flight. (The scan from the start walked every op held: with a member
        # who never acknowledges, all of them, at every other member's acknowledgement.)
        for seq, at in reversed(ops.items()):
            if at <= fed:
                return seq
        return min(ops) - 1

    def _lock(self, unit: str) -> trio.Lock:
        lock = self._locks.get(unit)
        if lock is None:
            lock = self._locks[unit] = trio.Lock()
        return lock
