"""A stateless relay node on NATS JetStream: any number of them, no leader, no lease.

Theory of operation
-------------------
Every node runs the same code: the ordinary shell (:class:`~relay.server.RelayServer`) with one
:class:`~relay.core.RelayCore` whose rooms, slots and grants are a *cache* of the stream (see
:mod:`relay.nats_store`), kept in step with other nodes' writes by the feed
(:mod:`relay.node_feed`). This module is the request path. A request that writes a unit (a
room's membership or log, a slot, a grant) is handled under that unit's lock on this node:

1. the core decides against the cache (every rule as with SQLite) and changes it;
2. the writes are published by compare-and-set against the unit's last sequence as this node saw
   it; JetStream's stream leader orders all nodes' writes to the unit;
3. won: the replies and this node's pushes go out (durable before sent). Lost
   (:class:`~relay.nats_store.WriteConflict`): the unit is reloaded from the stream and the
   request decided again, so it may now be refused (``not_a_member`` after a removal: kick then
   rekey holds across nodes).

While a unit is being written here, its stored messages from the feed wait in a buffer.

Requests that write no unit (hello, resume, ack, reads) take the shell's ordinary path: cursors
and devices are newest-wins messages, not compare-and-set. A refusal decided on the cache is
checked once against a fresh load of the unit before it is sent, so a client that moved to this
node right after a change elsewhere is not refused on stale state. A resume replays from the
cache only once no write decided here is in doubt in its rooms (none in flight, stale ones
reloaded), so it sends only what is stored.

Presence is :mod:`relay.node_presence`; rate limits are per node. A node that dies takes nothing
with it but its connections: its clients reconnect to any node and resume from their cursors.
"""

from __future__ import annotations

import contextlib
import logging

import trio
from trio_websocket import WebSocketConnection

from crosstalk.crypto import fingerprint
from crosstalk.errors import CrosstalkError, RemoteProtocolError, StorageUnavailable
from crosstalk.sim_hooks import probe
from crosstalk.wire import relay as w
from relay.conn import verify_sig
from relay.effects import Close, Effect, Send
from relay.http import ReplayStream
from relay.limits import RelayConfig
from relay.nats_layout import MAX_GROUP_OPS
from relay.nats_store import NatsStorage, WriteConflict
from relay.node_feed import FedServer
from relay.node_presence import NodeTimings, Presence
from relay.rooms import check_id
from relay.server import ShellTimings, _Link
from relay.storage import GrantDeleted, GrantPut, OpAppended, Write

log = logging.getLogger(__name__)

MAX_TRIES = 64  # compare-and-set rounds for one request before its connection is dropped
# A client's WebSocket message and its frame as the reader decoded it (None: it did not decode;
# the core refuses it as it would on one relay).
_Message = tuple[str | bytes, w.ClientFrame | None]
ROOM_WRITERS = (w.Create, w.Add, w.Accept, w.Decline, w.Leave, w.Remove, w.Post)
SLOT_WRITERS = (w.SlotJoin, w.SlotSend, w.SlotClose)
# Refusals that no fresher state would change: not worth a reload.
FINAL = frozenset({"rate_limited", "backlog_full", "too_large", "bad_frame", "unauthenticated",
                   "version", "forbidden", "work_required"})


class NodeServer(FedServer):
    """A relay node: the ordinary shell, deciding against a cache and writing by CAS."""

    def __init__(
        self, storage: NatsStorage, signing_key_seed: bytes, *, config: RelayConfig | None = None,
        timings: ShellTimings | None = None, node_timings: NodeTimings | None = None,
        node: str | None = None, client_address_header: str | None = None,
    ) -> None:
        super().__init__(storage, signing_key_seed, config=config, timings=timings, node=node,
                         client_address_header=client_address_header)
        self.node_timings = node_timings or NodeTimings()
        self.presence = Presence(self.core, storage, self.node, self.node_timings, self._feed)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(super().run)
            nursery.start_soon(self.presence.run)
            task_status.started()

    def _heard(self, data: bytes) -> None:
        self.presence.heard(data)

    # --- requests that write a unit -----------------------------------------------------------

    async def _reader(self, ws: WebSocketConnection, conn: int, link: _Link) -> None:
        held: str | bytes | None = None  # read while gathering posts, not part of them
        while True:
            if held is None:
                message = await self._next_message(ws, link)
                if message is None:
                    return
            else:
                message, held = held, None
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
                arriving = _hello_of(self, conn, frame)
                try:
                    if arriving is not None and not await self._follow_rooms_of(arriving):
                        link.close_reason = "the relay's storage did not answer; reconnect"
                        self._enqueue(conn, link, None)
                        continue
                    known = self.core.identity_of(conn)
                    self._feed(self.core.frame_received(conn, message, self._clock(), frame))
                finally:
                    if arriving is not None:
                        self._arrived_done(arriving)
                if known is None and self.core.identity_of(conn) is not None:
                    self.presence.changed()
                continue
            messages: list[_Message] = [(message, frame)]
            if isinstance(frame, w.Post):
                held = self._gather_posts(ws, frame.room, messages, link)
            async with self._lock(unit):
                if not await self._decide(conn, messages, unit):
                    link.close_reason = "the relay's storage did not answer; reconnect"
                    self._enqueue(conn, link, None)

    def _gather_posts(
        self, ws: WebSocketConnection, room: str, messages: list[_Message], link: _Link,
    ) -> str | bytes | None:
        """Add to ``messages`` the posts to ``room`` already received behind the first: they
        are decided together and stored as one message under one compare-and-set (a sender
        with posts in flight otherwise gets one per JetStream round trip). Returns the first
        message read that is not one of them, for the reader to handle next."""
        while len(messages) < MAX_GROUP_OPS:
            message = _received(ws)
            if message is None:
                return None
            link.last_inbound = trio.current_time()
            self.counters.frames_in += 1
            try:
                frame = w.decode_client_frame(message)
            except RemoteProtocolError:
                return message
            if not isinstance(frame, w.Post) or frame.room != room:
                return message
            messages.append((message, frame))
        return None

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
            self._feed(self.core.frame_received(conn, message, self._clock(), frame))
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
            writes = await self.nats.adevice(fp, device)
        except StorageUnavailable:
            return
        if writes and not self.core.knows_device(fp, device):
            self._feed(self.core.stored_elsewhere(writes, ""))

    async def _decide(self, conn: int, messages: list[_Message], lock: str) -> bool:
        """Handle requests that write one unit (one, or posts gathered from one connection),
        decided together and stored together; False if storage failed. Each message comes
        with its frame, decoded once by the reader (the core would decode it again, per try:
        as much CPU as the rest of deciding a post)."""
        checked = False
        for _ in range(MAX_TRIES):
            if lock in self._stale and not await self._reload_busy(lock):
                return False
            # What was queued before goes out first, this connection's and others' (a replay
            # must not be overtaken by a push this request makes). Waited for here, holding the
            # unit, right before deciding: while this task took the lock (or reloaded), the feed
            # may have taken in another node's op of the room and queued its push; the op this
            # request adds after it is sent at once, and must not overtake it (seed 39).
            while self._pending or self._committing:
                await self._drained.wait()
            now = self._clock()
            started = trio.current_time()  # for the commit histogram (posts, sequenced here)
            effects: list[Effect] = []
            for message, frame in messages:
                effects += self.core.frame_received(conn, message, now, frame)
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
                if unit.startswith("r."):
                    # Before the write, on the same connection: a won compare-and-set means
                    # the cache held all before it, and the feed brings all after it.
                    self._follow(unit[2:])
            try:
                by = _by(self, conn)
                await self.nats.acommit(writes, by)
            except WriteConflict as lost:
                self.conflicts += 1
                probe("node.write_conflict")
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
            else:
                # Sent before the unit's waiting messages are applied: another node's next op
                # of the room, stored after this one, must not be pushed ahead of it.
                self._won(effects, started)
                return True
            finally:
                self._release(units)
        return False

    def _won(self, effects: list[Effect], started: float) -> None:
        """Send what a request whose writes are stored means (durable before sent)."""
        committed = trio.current_time()
        posts = sum(type(e) is OpAppended for e in effects)
        if posts:
            self.latencies.commit.observe(committed - started, posts)
        self._dispatch(effects, committed)

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
                await self.nats.acommit(grants, by)
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

    async def _commit(self, writes: list[Write]) -> None:
        """Writes of the ordinary path (cursors, devices, prunes, expiries): no request waits
        on a unit here, so a lost compare-and-set (another node expired the slot first) only
        reloads the unit."""
        units = self.nats.layout.units_of(writes)
        for unit in units:
            self._busy.setdefault(unit, [])
        self._committing = True  # the committer holds frames back until this returns
        try:
            await self.nats.acommit(writes)
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
        self, ws: WebSocketConnection, stream: ReplayStream, conn: int, source: str,
        reason: list[str | None],
    ) -> None:
        try:
            await super()._run_link(ws, stream, conn, source, reason)
        finally:
            self.presence.changed()
            self._unfollow_idle()


def _hello_of(server: NodeServer, conn: int, frame: w.ClientFrame | None) -> str | None:
    """The identity a hello on a connection not yet authenticated proves to be, checked as the
    core will check it: its rooms are followed (reloaded) before the core handles the hello,
    so a forged hello must not cost the node a reload of someone else's rooms."""
    if (not isinstance(frame, w.Hello) or len(frame.ed_pub) != 32 or len(frame.x_pub) != 32
            or frame.version != w.PROTOCOL_VERSION):
        return None
    core = server.core
    c = core._conns.get(conn)
    if c is None or c.peer is not None:
        return None
    transcript = w.hello_transcript(c.nonce, core._relay_pub, frame.ed_pub, frame.x_pub,
                                    frame.device, frame.version)
    try:
        verify_sig(frame.ed_pub, transcript, frame.sig, "unauthenticated", "")
    except RemoteProtocolError:
        return None
    return fingerprint(frame.ed_pub)


def _received(ws: WebSocketConnection) -> str | bytes | None:
    """A message trio-websocket has received and queued, without waiting (None: none yet).
    trio-websocket offers no public call for this; its queue is a Trio memory channel (checked
    in tests/relay/test_nats_node_received.py). Should a release rename it, posts are no longer
    grouped, and nothing else changes."""
    queue = getattr(ws, "_recv_channel", None)
    if queue is None:
        return None
    try:
        message: str | bytes = queue.receive_nowait()
    except (trio.WouldBlock, trio.ClosedResourceError, trio.EndOfChannel):
        return None
    return message


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
