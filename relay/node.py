"""A stateless relay node on NATS JetStream: any number of them, no leader, no lease.

Theory of operation
-------------------
Every node runs the same code: the ordinary shell (:class:`~relay.server.RelayServer`) with one
:class:`~relay.core.RelayCore` whose rooms, slots and grants are a *cache* of the stream (see
:mod:`relay.nats_store`). A request that writes a unit (a room's membership or log, a slot, a
grant) is handled under that unit's lock on this node:

1. the core decides against the cache (every rule as with SQLite) and changes it;
2. the writes are published by compare-and-set against the unit's last sequence as this node saw
   it; JetStream's stream leader orders all nodes' writes to the unit;
3. won: the replies and this node's pushes go out (durable before sent). Lost
   (:class:`~relay.nats_store.WriteConflict`): the unit is reloaded from the stream and the
   request decided again, so it may now be refused (``not_a_member`` after a removal: kick then
   rekey holds across nodes).

Writes of other nodes reach this node through the stream's RePublish (``N.p.>``), which sends
only what was stored. A message for a unit carries the sequence it was checked against; if that
is not what this node last saw of the unit, something was missed and the unit is reloaded;
otherwise the core applies it and pushes it to its own connections (:mod:`relay.replica`).
While a unit is being written or reloaded here, its messages wait in a buffer.

Requests that write no unit (hello, resume, ack, reads) take the shell's ordinary path: cursors
and devices are newest-wins messages, not compare-and-set. A refusal decided on the cache is
checked once against a fresh load of the unit before it is sent, so a client that moved to this
node right after a change elsewhere is not refused on stale state. A resume replays from the
cache only once no write decided here is in doubt in its rooms (none in flight, stale ones
reloaded), so it sends only what is stored.

Presence: each node publishes the identities it has online on ``N.presence.<node>`` when that
set changes and every ``beat``; an identity counts as online elsewhere while some other node
listed it within ``presence_timeout``. Rate limits are per node. A node that dies takes nothing
with it but its connections: its clients reconnect to any node and resume from their cursors.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import secrets
import time
from functools import partial
from typing import Any

import attrs
import trio
from nacl.signing import SigningKey
from nats.aio.msg import Msg
from trio_websocket import ConnectionClosed, WebSocketConnection

from crosstalk.crypto import fingerprint
from crosstalk.errors import CrosstalkError, RemoteProtocolError, StorageUnavailable, UsageError
from crosstalk.wire import relay as w
from relay.effects import Close, Effect, Send
from relay.limits import RelayConfig
from relay.nats_store import NatsStorage, WriteConflict
from relay.replica import Gap
from relay.rooms import check_id
from relay.server import RelayServer, ShellTimings, _Link
from relay.storage import GrantDeleted, GrantPut, OpsPruned, Write

log = logging.getLogger(__name__)

MAX_TRIES = 64  # compare-and-set rounds for one request before its connection is dropped
RELOAD_BACKOFF = 0.25  # seconds before retrying a failed reload, doubling ...
RELOAD_BACKOFF_MAX = 4.0  # ... up to this
ROOM_WRITERS = (w.Create, w.Add, w.Accept, w.Decline, w.Leave, w.Remove, w.Post)
SLOT_WRITERS = (w.SlotJoin, w.SlotSend, w.SlotClose)
# Refusals that no fresher state would change: not worth a reload.
FINAL = frozenset({"rate_limited", "backlog_full", "too_large", "bad_frame", "unauthenticated",
                   "version", "forbidden"})


@attrs.frozen
class NodeTimings:
    beat: float = 5.0  # seconds between presence announcements
    presence_timeout: float = 15.0  # a node not heard from this long has nobody online


@attrs.frozen
class _Feed:
    seq: int
    subject: str
    headers: dict[str, str]
    data: bytes


class NodeServer(RelayServer):
    """A relay node: the ordinary shell, deciding against a cache and writing by CAS."""

    def __init__(
        self, storage: NatsStorage, signing_key_seed: bytes, *, config: RelayConfig | None = None,
        timings: ShellTimings | None = None, node_timings: NodeTimings | None = None,
        node: str | None = None, client_address_header: str | None = None,
    ) -> None:
        public = bytes(SigningKey(signing_key_seed).verify_key)
        if storage.ensure_key(public) != public:
            raise UsageError(
                "This node's relay key differs from the one the cluster recorded; copy relay.key "
                "from a running node."
            )
        self.nats = storage
        self.node = node or secrets.token_hex(4)
        self.node_timings = node_timings or NodeTimings()
        self._inbox: collections.deque[_Feed] = collections.deque()
        self._token: trio.lowlevel.TrioToken | None = None
        self._arrived = trio.Event()
        self._poked = False  # a wake-up of the feeder is on its way (set on the NATS thread)
        self._committing = False  # the committer is storing a batch whose frames wait
        self._busy: dict[str, list[_Feed]] = {}
        self._locks: dict[str, trio.Lock] = {}
        # Units whose cache may hold what the stream does not (a write whose outcome is unknown)
        # or miss what it does (a failed reload): reloaded before anything is decided on them.
        self._stale: set[str] = set()
        self._remote: dict[str, tuple[set[str], float]] = {}  # node -> (identities, heard at)
        self._announced: set[str] = set()
        self._identities_changed = trio.Event()  # an identity came or went here: announce now
        self._nursery: trio.Nursery | None = None
        self.conflicts = 0
        storage._call(self._subscribe)  # before the load below, so nothing falls in between
        storage.on_reconnect = self._poke_resync
        super().__init__(storage, signing_key_seed, config=config, timings=timings,
                         client_address_header=client_address_header)
        # The last stream seq this node has taken in, in order: its load, then its feed.
        self.fed_through = storage.loaded_through
        self.core.limit_pruning(self._prunable)

    # --- the feed -------------------------------------------------------------------------------

    async def _subscribe(self) -> None:
        lay = self.nats.layout
        prefix = f"{lay.republished}."

        async def stored(msg: Msg) -> None:
            headers = msg.headers or {}  # a dict of its own per message
            subject = f"{lay.root}.{msg.subject[len(prefix):]}"
            self._inbox.append(_Feed(int(headers.get("Nats-Sequence", 0)), subject, headers,
                                     msg.data))
            self._poke()

        async def presence(msg: Msg) -> None:
            self._inbox.append(_Feed(-1, msg.subject, {}, msg.data))
            self._poke()

        await self.nats.nc.subscribe(f"{lay.republished}.>", cb=stored)
        await self.nats.nc.subscribe(f"{lay.ns}.presence.*", cb=presence)

    def _poke(self) -> None:
        """On the NATS thread: wake the feeder in Trio (never blocks). One wake-up is enough
        for everything queued before the feeder runs: each costs a write to Trio's wake-up
        socket and a thread switch, and messages come in bursts."""
        token = self._token
        if token is not None and not self._poked:
            self._poked = True
            try:
                token.run_sync_soon(self._wake_feeder)
            except trio.RunFinishedError:
                pass

    def _poke_resync(self) -> None:
        """On the NATS thread, after a reconnect: what was republished while this node was
        away is lost (core NATS), and a unit written last in that time would show no gap, so
        every unit this node knows is reloaded."""
        self._inbox.append(_Feed(-2, "", {}, b""))
        self._poke()

    def _wake_feeder(self) -> None:
        # In Trio, before the feeder drains: what the NATS thread queues after this pokes again.
        self._poked = False
        self._arrived.set()  # the event current now, not when the NATS thread asked

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(super().run)
            self._token = trio.lowlevel.current_trio_token()
            nursery.start_soon(self._feeder)
            nursery.start_soon(self._presence)
            task_status.started()

    async def _feeder(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived = trio.Event()
            while self._inbox:
                item = self._inbox.popleft()
                self.fed_through = max(self.fed_through, item.seq)
                if item.seq == -2:
                    self._resync()
                elif item.seq < 0:
                    self._heard(item)
                else:
                    self._stored(item)
            await trio.lowlevel.checkpoint()

    def _stored(self, item: _Feed) -> None:
        unit = self.nats.layout.unit_of_subject(item.subject)
        if (unit is not None and unit not in self._busy
                and item.seq <= self.nats.tails.last.get(unit, 0)):
            return  # this node's own write, or one it reloaded already: not decoded again
        try:
            stored = self.nats.layout.decode(item.subject, item.headers, item.data)
        except (KeyError, ValueError, TypeError, RemoteProtocolError):
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
        if stored.unit in self._busy:
            self._busy[stored.unit].append(item)
            return
        last = self.nats.tails.last.get(stored.unit, 0)
        if item.seq <= last:
            return  # this node's own write, or one it reloaded already
        if item.headers.get("Nats-Expected-Last-Subject-Sequence") != str(last):
            self._start_reload(stored.unit)
            return
        try:
            effects = self.core.stored_elsewhere(stored.writes, stored.by)
        except Gap:
            self._start_reload(stored.unit)
            return
        self.nats.tails.saw(item.seq, stored)
        self._deliver(effects)

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

    def _start_reload(self, unit: str) -> None:
        self._busy.setdefault(unit, [])
        assert self._nursery is not None
        self._nursery.start_soon(self._reload_task, unit)

    async def _reload_task(self, unit: str) -> None:
        """Reload ``unit`` until it works (NATS may be electing a leader), its stored messages
        waiting meanwhile; a unit left stale would push nothing until its next write."""
        delay = RELOAD_BACKOFF
        while True:
            async with self._lock(unit):
                self._busy.setdefault(unit, [])
                try:
                    await self._reload(unit)
                    return
                except StorageUnavailable as exc:
                    log.warning("relay node %s: cannot reload %s: %s", self.node, unit, exc)
                finally:
                    if unit not in self._stale:
                        self._release([unit])
            await trio.sleep(delay)  # back off while NATS cannot answer
            delay = min(delay * 2, RELOAD_BACKOFF_MAX)

    async def _reload(self, unit: str) -> None:
        """Replace the cache of ``unit`` with what the stream holds now (caller holds it busy)."""
        self._stale.add(unit)
        snapshot, tails = await self.nats.acall(lambda: self.nats.areload(unit))
        self._stale.discard(unit)
        self.nats.tails.last[unit] = tails.last.get(unit, 0)
        if unit.startswith("r."):
            self.nats.tails.ops[unit[2:]] = tails.ops.get(unit[2:], {})
        self._deliver(self.core.reload(unit, snapshot))

    def _release(self, units: list[str]) -> None:
        """Stop buffering ``units``' stored messages and apply what waited."""
        waiting: list[_Feed] = []
        for unit in units:
            waiting.extend(self._busy.pop(unit, []))
        for item in sorted(waiting, key=lambda i: i.seq):
            self._stored(item)

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
        return max((seq for seq, at in ops.items() if at <= fed), default=min(ops) - 1)

    def _lock(self, unit: str) -> trio.Lock:
        lock = self._locks.get(unit)
        if lock is None:
            lock = self._locks[unit] = trio.Lock()
        return lock

    # --- requests that write a unit -----------------------------------------------------------

    async def _reader(self, ws: WebSocketConnection, conn: int, link: _Link) -> None:
        while True:
            try:
                message = await ws.get_message()
            except ConnectionClosed:
                return
            link.last_inbound = trio.current_time()
            self.counters.frames_in += 1
            await self._wait_for_room()
            try:
                frame: w.ClientFrame | None = w.decode_client_frame(message)
            except RemoteProtocolError:
                frame = None  # the core refuses it as it would on one relay
            unit = _unit_of(frame)
            if isinstance(frame, w.Resume):
                if not await self._resume(conn, message, frame):
                    link.close_reason = "the relay's storage did not answer; reconnect"
                    self._enqueue(conn, link, None)
                continue
            if unit is None:
                await self._recall_device(frame)
                known = self.core.identity_of(conn)
                self._feed(self.core.frame_received(conn, message, self._clock()))
                if known is None and self.core.identity_of(conn) is not None:
                    self._identities_changed.set()
                continue
            # What was queued before goes out first, this connection's and others' (a replay
            # must not be overtaken by a push this request makes).
            while self._pending or self._committing:
                await self._drained.wait()
            async with self._lock(unit):
                if not await self._decide(conn, message, unit):
                    link.close_reason = "the relay's storage did not answer; reconnect"
                    self._enqueue(conn, link, None)

    async def _resume(self, conn: int, message: str | bytes, frame: w.Resume) -> bool:
        """A resume replays rooms from the cache, which may hold a write decided here but not
        stored: one in flight (its room's lock is held) or one whose outcome is unknown (a stale
        unit). The replay waits for the first and reloads the second, holding the rooms' locks
        while the core answers, so it sends only what is stored (else the client would get that
        op and then the stored one at its seq). Rooms the frame does not name are replayed too
        (a lost accept); of those only stale ones are reloaded. False if storage failed."""
        named = {f"r.{room}" for room in frame.cursors}  # a room never written here has no lock
        units = sorted({u for u in named if u in self._locks}
                       | {u for u in self._stale if u.startswith("r.")})
        async with contextlib.AsyncExitStack() as held:
            for unit in units:  # in order: no other task holds two locks
                await held.enter_async_context(self._lock(unit))
                if unit in self._stale and not await self._reload_busy(unit):
                    return False
            self._feed(self.core.frame_received(conn, message, self._clock()))
        return True

    async def _recall_device(self, frame: w.ClientFrame | None) -> None:
        """Before a hello from a device this node does not know: take in the device and its
        cursors if another node stored them (its first hello was there, within the RePublish
        delay), so it is not registered again at this node's head, skipping ops it is owed.
        One lookup per unknown device; if NATS does not answer, the device counts as new."""
        if not isinstance(frame, w.Hello) or len(frame.ed_pub) != 32:
            return
        fp, device = fingerprint(frame.ed_pub), frame.device
        try:
            check_id(device, "device")
        except RemoteProtocolError:
            return
        if self.core.knows_device(fp, device):
            return
        try:
            writes: list[Write] = await self.nats.acall(partial(self.nats.adevice, fp, device))
        except StorageUnavailable:
            return
        if writes and not self.core.knows_device(fp, device):
            self._feed(self.core.stored_elsewhere(writes, ""))

    async def _decide(self, conn: int, message: str | bytes, lock: str) -> bool:
        """Handle one request that writes a unit; False if storage failed."""
        checked = False
        for _ in range(MAX_TRIES):
            if lock in self._stale and not await self._reload_busy(lock):
                return False
            effects = self.core.frame_received(conn, message, self._clock())
            writes: list[Write] = [e for e in effects if not isinstance(e, Send | Close)]
            if not writes:
                if not checked and _refused(effects) and lock.startswith(("r.", "slot.")):
                    checked = True  # decided on a cache that may be stale: check once
                    before = self.nats.tails.last.get(lock, 0)
                    if await self._reload_busy(lock) and self.nats.tails.last.get(lock) != before:
                        continue
                self._dispatch(effects)
                return True
            units = self.nats.layout.units_of(writes)
            if self._stale.intersection(units):  # decided on a cache that may be wrong
                if not await self._reload_all(units):
                    return False
                continue
            for unit in units:
                self._busy.setdefault(unit, [])
            try:
                by = _by(self, conn)
                await self.nats.acall(partial(self.nats.acommit, writes, by))
            except WriteConflict as lost:
                self.conflicts += 1
                if _settles(units, lost.unit):  # the request's own unit is stored
                    if not await self._settle_grants(writes, by):
                        return False
                    self._dispatch(effects)
                    return True
                await self._reload_all(units)
                continue
            except (StorageUnavailable, CrosstalkError) as exc:
                log.warning("relay node %s: a write failed: %s", self.node, exc)
                await self._reload_all(units)
                return False
            finally:
                self._release(units)
            self._dispatch(effects)
            return True
        return False

    async def _settle_grants(self, writes: list[Write], by: str) -> bool:
        """Store a request's grant writes after its room or slot write won and a grant write
        lost (another node wrote the grant since this node saw it): the request is done, so
        deciding it again would refuse it (``already_member``, or a join without its grant).
        A grant's writes are whole values (put with an expiry, or spent), so they are written
        again against the grant's fresh sequence; False if storage failed."""
        grants: list[Write] = [x for x in writes if isinstance(x, GrantPut | GrantDeleted)]
        units = self.nats.layout.units_of(grants)
        for _ in range(MAX_TRIES):
            if not await self._reload_all(units):
                return False
            try:
                await self.nats.acall(partial(self.nats.acommit, grants, by))
            except WriteConflict:
                self.conflicts += 1
                continue
            except (StorageUnavailable, CrosstalkError) as exc:
                log.warning("relay node %s: a grant write failed: %s", self.node, exc)
                await self._reload_all(units)
                return False
            self._feed(self.core.stored_elsewhere(grants, by))  # the cache as stored now
            return True
        return False

    async def _reload_busy(self, unit: str) -> bool:
        self._busy.setdefault(unit, [])
        try:
            await self._reload(unit)
            return True
        except StorageUnavailable:
            return False
        finally:
            self._release([unit])

    async def _reload_all(self, units: list[str]) -> bool:
        """Reload ``units``; a unit that fails stays stale and is retried in the background."""
        done = True
        for unit in units:
            try:
                await self._reload(unit)
            except StorageUnavailable as exc:
                log.warning("relay node %s: cannot reload %s: %s", self.node, unit, exc)
                self._start_reload(unit)
                done = False
        return done

    async def _commit(self, writes: list[Write]) -> None:
        """Writes of the ordinary path (cursors, devices, prunes, expiries): no request waits
        on a unit here, so a lost compare-and-set (another node expired the slot first) only
        reloads the unit."""
        units = self.nats.layout.units_of(writes)
        for unit in units:
            self._busy.setdefault(unit, [])
        self._committing = True  # the committer holds frames back until this returns
        try:
            await self.nats.acall(lambda: self.nats.acommit(writes))
        except WriteConflict:
            await self._reload_all(units)
        except StorageUnavailable as exc:
            # Not fatal as with SQLite: a lost cursor only re-delivers, a lost device record is
            # written again at its next hello, and the units are reloaded (an expiry is redone).
            log.warning("relay node %s: %d writes not stored: %s", self.node, len(writes), exc)
            await self._reload_all(units)
        finally:
            try:
                self._release(units)  # what waited goes behind the batch, not ahead of it
            finally:
                self._committing = False
        self.counters.commits += 1
        self.counters.committed_writes += len(writes)

    async def _run_link(
        self, ws: WebSocketConnection, conn: int, source: str, reason: list[str | None]
    ) -> None:
        try:
            await super()._run_link(ws, conn, source, reason)
        finally:
            self._identities_changed.set()

    # --- presence -----------------------------------------------------------------------------

    async def _presence(self) -> None:
        """Announce this node's identities when they change (at once: a node may die any
        moment after a client said hello) and every ``beat``; expire silent nodes."""
        t = self.node_timings
        subject = f"{self.nats.layout.ns}.presence.{self.node}"
        sent_at = -1e9
        while True:
            self._identities_changed = trio.Event()
            here = self.core.identities()
            now = time.monotonic()
            if here != self._announced or now - sent_at >= t.beat:
                body = json.dumps({"node": self.node, "fps": sorted(here)}).encode()
                try:
                    await self.nats.acall(partial(self.nats.nc.publish, subject, body))
                    self._announced, sent_at = here, now
                except StorageUnavailable:
                    pass
            self._expire_presence(now)
            with trio.move_on_after(min(t.beat, t.presence_timeout) / 4):
                await self._identities_changed.wait()

    def _heard(self, item: _Feed) -> None:
        try:
            body: Any = json.loads(item.data)
            node, fps = str(body["node"]), {str(fp) for fp in body["fps"]}
        except (ValueError, KeyError, TypeError):
            return
        if node == self.node:
            return
        before = self._elsewhere()
        self._remote[node] = (fps, time.monotonic())
        self._changed(before)

    def _expire_presence(self, now: float) -> None:
        before = self._elsewhere()
        limit = self.node_timings.presence_timeout
        self._remote = {n: v for n, v in self._remote.items() if now - v[1] < limit}
        self._changed(before)

    def _elsewhere(self) -> set[str]:
        out: set[str] = set()
        for fps, _ in self._remote.values():
            out |= fps
        return out

    def _changed(self, before: set[str]) -> None:
        after = self._elsewhere()
        effects: list[Effect] = []
        for fp in sorted(after - before):
            effects += self.core.presence_elsewhere(fp, True)
        for fp in sorted(before - after):
            effects += self.core.presence_elsewhere(fp, False)
        self._feed(effects)


def _unit_of(frame: w.ClientFrame | None) -> str | None:
    """The lock a request needs: its room or slot (``slot-open`` for a new slot)."""
    if isinstance(frame, ROOM_WRITERS):
        return f"r.{frame.room}"
    if isinstance(frame, SLOT_WRITERS):
        return f"slot.{frame.slot}"
    if isinstance(frame, w.SlotOpen):
        return "slot-open"
    return None


def _settles(units: list[str], lost: str) -> bool:
    """Whether a lost compare-and-set of ``lost`` leaves only grant writes to store: every unit
    before it was stored (writes go out in order) and only grants follow."""
    if lost not in units or units.index(lost) == 0:
        return False
    return all(u.startswith("grant.") for u in units[units.index(lost):])


def _refused(effects: list[Effect]) -> bool:
    return any(isinstance(e, Send) and isinstance(e.frame, w.Error) and e.frame.code not in FINAL
               for e in effects)


def _by(server: NodeServer, conn: int) -> str:
    return server.core.identity_of(conn) or ""
