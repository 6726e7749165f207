"""Several relay nodes on one NATS JetStream: any node serves any client; one node sequences.

Theory of operation
-------------------
The relay core is one state machine (rosters, logs, seqs, presence, slots) whose rules need a
single order of events, so a cluster runs exactly one core at a time, on the *leader*. Every
node accepts WebSocket clients; a follower turns its connections' events (opened, frame, closed)
into messages on ``N.in.<leader node>`` and the leader feeds them to its core as connections
with cluster-wide ids. After the leader's group commit (to JetStream, see
:mod:`relay.nats_store`) the frames for a follower's connections go out as one message per node
per batch on ``N.out.<node>``; the follower hands them to its sockets. So fan-out across nodes is
per node, not per room: with one sequencer a room subject would only add a hop. "Durable before
sent" still holds, because the leader publishes only after its commit.

Leadership is a lease in stream ``N_lease`` (subject ``N.lease``, ``max_age`` = the TTL): a node
takes it by publishing with ``Nats-Expected-Last-Subject-Sequence: 0`` (only possible once the
previous lease expired) and renews it every ``beat`` against the sequence it last wrote, so a
stale leader can never renew. The payload names the node and the *epoch* (the sequence of the
take). Every message between nodes carries the epoch; a message from another epoch is dropped.
A leader that misses a renewal stops committing (``FencedStorage``) and exits. When a node sees
a new epoch it closes all its client connections; clients reconnect (to any node) and resume from
their cursors, so nothing acknowledged is lost and nothing is delivered twice by the relay in
one connection. A node that stops beating is forgotten by the leader after ``node_timeout`` and
its connections are closed in the core (presence goes offline).

A new leader builds its core from the stored snapshot, which holds live pairing slots (with
their spent join and sealed parts) and pairing grants as well as rooms, so a pairing in progress
carries on once both daemons reconnect and re-attach to the slot; only presence and the
in-memory rate-limit windows (op rate, pairing guesses per address) start afresh.

All nodes of a cluster must hold the same relay key (clients pin it); the first node records its
public key in the state bucket and a node with another key refuses to start.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import trio
from nacl.signing import SigningKey
from nacl.utils import random
from nats.aio.msg import Msg
from nats.js.api import StorageType, StreamConfig
from nats.js.errors import APIError, NotFoundError

from crosstalk.errors import StorageUnavailable, UsageError
from relay.core import RelayCore, RelayStats
from relay.effects import Close, Effect
from relay.limits import RelayConfig
from relay.nats_store import NatsStorage
from relay.routing import Routes, event_body, parse_delivery, parse_event
from relay.server import RelayServer, ShellTimings
from relay.storage import Snapshot, Write

log = logging.getLogger(__name__)


@attrs.frozen
class ClusterTimings:
    lease_ttl: float = 3.0
    beat: float = 0.5
    node_timeout: float = 5.0
    margin: float = 0.5  # stop committing this long before the lease could expire


class FencedStorage:
    """The leader's storage: refuses to commit unless this node's lease is certainly valid."""

    def __init__(self, inner: NatsStorage) -> None:
        self.inner = inner
        self.valid_until = 0.0  # time.monotonic() bound, set by each renewal

    def load(self) -> Snapshot:
        return self.inner.load()

    def commit(self, writes: Sequence[Write]) -> None:
        if time.monotonic() >= self.valid_until:
            raise StorageUnavailable("this relay node lost its leadership lease; not committing")
        self.inner.commit(writes)

    def close(self) -> None:
        self.inner.close()


class ClusterServer(RelayServer):
    """A relay node: the ordinary shell, with its core calls routed through the cluster."""

    def __init__(
        self, storage: NatsStorage, signing_key_seed: bytes, *, config: RelayConfig | None = None,
        timings: ShellTimings | None = None, cluster: ClusterTimings | None = None,
        node: str | None = None,
    ) -> None:
        self.fenced = FencedStorage(storage)
        # The commit is a NATS round trip: wait for it in a thread, so the leader keeps taking
        # frames (its own and other nodes') meanwhile.
        super().__init__(self.fenced, signing_key_seed, config=config, timings=timings,
                         commit_in_thread=True)
        self.nats = storage
        self.node = node or secrets.token_hex(4)
        self.cluster = cluster or ClusterTimings()
        self.board = Switchboard(self, SigningKey(signing_key_seed), config)
        self.core = self.board  # type: ignore[assignment]  # same calls, routed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(super().run)
            await self.board.start(nursery)
            task_status.started()

    def _dispatch(self, batch: list[Effect]) -> None:
        super()._dispatch(self.board.send_remote(batch))

    def wall_clock(self) -> float:
        return self._clock()

    def links(self) -> dict[int, Any]:
        return self._links

    def feed(self, effects: list[Effect]) -> None:
        self._feed(effects)

    def deliver(self, conn: int, text: str | None) -> None:
        link = self._links.get(conn)
        if link is not None:
            self._enqueue(conn, link, text)


class Switchboard:
    """Stands where the shell expects its core: runs the core (leader) or forwards (follower)."""

    def __init__(self, server: ClusterServer, key: SigningKey, config: RelayConfig | None) -> None:
        self.server = server
        self.ns = server.nats.namespace
        self._key = key
        self._config = config
        self.core: RelayCore | None = None
        self.epoch = 0
        self.leader = ""
        self._lease_seq = 0
        self.routes = Routes()
        self._token: trio.lowlevel.TrioToken | None = None
        self._outbox: Any = None  # an asyncio.Queue on the bridge loop
        self._publisher_task: Any = None

    # --- what the shell calls ----------------------------------------------------------------

    def connection_opened(self, conn: int, source: str, now: float) -> list[Effect]:
        if self.core is not None:
            return self.core.connection_opened(conn, source, now)
        if not self.leader:
            return [Close(conn, "no relay node is leading yet; retry")]
        self._to_leader(event_body("o", conn, source=source))
        return []

    def frame_received(self, conn: int, text: str | bytes, now: float) -> list[Effect]:
        if self.core is not None:
            return self.core.frame_received(conn, text, now)
        self._to_leader(event_body("f", conn, data=text))
        return []

    def connection_closed(self, conn: int, now: float) -> list[Effect]:
        if self.core is not None:
            return self.core.connection_closed(conn, now)
        self._to_leader(event_body("x", conn))
        return []

    def tick(self, now: float) -> list[Effect]:
        if self.core is None:
            return []
        out = self.core.tick(now)
        silent = self.routes.silent(time.monotonic(), self.server.cluster.node_timeout)
        for node, gids in silent.items():
            log.warning("relay node %s is silent; closing its %d connections", node, len(gids))
            for gid in gids:
                out.extend(self.core.connection_closed(gid, now))
        return out

    def statistics(self) -> RelayStats:
        if self.core is not None:
            return self.core.statistics()
        return RelayStats(len(self.server.links()), 0, 0, 0, 0, 0, 0, 0, 0, {})

    # --- NATS plumbing -----------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self.server.nats.on_reconnect.append(self._reconnected)
        await self._nats(self._setup)
        await self._look()  # know (or become) the leader before taking the first client
        nursery.start_soon(self._elections)

    async def _nats(self, factory: Callable[[], Any]) -> Any:
        bridge = self.server.nats.bridge
        try:
            return await bridge.acall(factory, self.server.nats.timeout)
        except TimeoutError as exc:
            raise StorageUnavailable(f"NATS did not answer: {exc}") from None

    async def _setup(self) -> None:
        nats = self.server.nats
        js = nats.js
        ttl = self.server.cluster.lease_ttl
        await js.add_stream(StreamConfig(
            name=f"{self.ns}_lease", subjects=[f"{self.ns}.lease"], storage=StorageType.FILE,
            max_age=ttl, max_msgs_per_subject=1, num_replicas=nats.replicas,
        ))
        await self._check_key(js)
        nc = nats.nc
        await nc.subscribe(f"{self.ns}.in.{self.server.node}", cb=self._arrived(self._on_in))
        await nc.subscribe(f"{self.ns}.out.{self.server.node}", cb=self._arrived(self._on_out))
        self._outbox = asyncio.Queue()
        self._publisher_task = asyncio.ensure_future(self._publisher(nc))

    async def _check_key(self, js: Any) -> None:
        mine = base64.b64encode(bytes(self._key.verify_key))
        subject = f"$KV.{self.ns}_state.relaykey"
        try:
            await js.publish(subject, mine, headers={"Nats-Expected-Last-Subject-Sequence": "0"})
        except APIError:
            recorded = await js.get_last_msg(f"KV_{self.ns}_state", subject)
            if recorded.data != mine:
                raise UsageError(
                    "This node's relay key differs from the cluster's; copy relay.key from a "
                    "node of the cluster into --data.") from None

    def _reconnected(self) -> None:
        """On the asyncio thread: NATS came back, and messages in between may be lost."""
        assert self._token is not None
        try:
            self._token.run_sync_soon(self._resync)
        except trio.RunFinishedError:
            pass

    def _resync(self) -> None:
        """Make every client resume: drop local connections, and the leader forgets remote ones."""
        log.warning("relay node %s: NATS reconnected; clients must resume", self.server.node)
        self._drop_local()
        if self.core is not None:
            now = self.server.wall_clock()
            for node, conns in self.routes.forget_all().items():
                for gid, _ in conns:
                    self.server.feed(self.core.connection_closed(gid, now))
                items = [[conn, None] for _, conn in conns]
                self._publish(f"{self.ns}.out.{node}", {"e": self.epoch, "i": items})

    def _arrived(self, handler: Callable[[bytes], None]) -> Callable[[Msg], Any]:
        def guarded(data: bytes) -> None:
            try:  # an exception here would end the Trio run, and with it every connection
                handler(data)
            except Exception:
                log.error("relay node %s: a cluster message failed", self.server.node,
                          exc_info=True)

        async def cb(msg: Msg) -> None:
            assert self._token is not None
            try:
                self._token.run_sync_soon(guarded, msg.data)
            except trio.RunFinishedError:
                pass
        return cb

    async def _publisher(self, nc: Any) -> None:
        while True:  # one task, so messages leave in the order they were queued
            subject, payload = await self._outbox.get()
            await nc.publish(subject, payload)

    def _publish(self, subject: str, body: dict[str, Any]) -> None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        loop = self.server.nats.bridge.loop
        loop.call_soon_threadsafe(self._outbox.put_nowait, (subject, payload))

    def _to_leader(self, body: dict[str, Any]) -> None:
        body.update(e=self.epoch, n=self.server.node)
        self._publish(f"{self.ns}.in.{self.leader}", body)

    # --- the leader's side -------------------------------------------------------------------

    def _on_in(self, data: bytes) -> None:
        """An event from a follower's connection (runs in Trio)."""
        event = parse_event(data)
        if self.core is None or event is None or event.epoch != self.epoch:
            return
        self.routes.heard(event.node, time.monotonic())
        now, core = self.server.wall_clock(), self.core
        if event.kind == "o":
            gid = self.routes.open(event.node, event.conn)
            self.server.feed(core.connection_opened(gid, event.source, now))
        elif event.kind == "f":
            known = self.routes.find(event.node, event.conn)
            if known is not None:
                self.server.feed(core.frame_received(known, event.data, now))
        elif event.kind == "x":
            gone = self.routes.close(event.node, event.conn)
            if gone is not None:
                self.server.feed(core.connection_closed(gone, now))

    def send_remote(self, batch: list[Effect]) -> list[Effect]:
        """Publish the frames for other nodes' connections (after commit); return the rest."""
        local, per_node = self.routes.split(batch)
        for node, items in per_node.items():
            self._publish(f"{self.ns}.out.{node}", {"e": self.epoch, "i": items})
        return local

    # --- the follower's side -----------------------------------------------------------------

    def _on_out(self, data: bytes) -> None:
        delivery = parse_delivery(data)
        if self.core is not None or delivery is None or delivery[0] != self.epoch:
            return
        for conn, text in delivery[1]:
            self.server.deliver(conn, text)

    # --- leadership ----------------------------------------------------------------------------

    async def _elections(self) -> None:
        beat = self.server.cluster.beat
        while True:
            if self.core is not None:
                await self._renew()
            else:  # a follower rides out a NATS outage; a leader (above) exits instead
                try:
                    await self._look()
                except StorageUnavailable as exc:
                    log.warning("relay node %s: %s", self.server.node, exc)
                if self.leader and self.core is None:
                    self._to_leader({"k": "b"})
            await trio.sleep(beat)

    async def _look(self) -> None:
        lease = await self._nats(self._read_lease)
        if lease is None:
            started, epoch = time.monotonic(), secrets.randbits(62) + 1
            taken = await self._nats(lambda: self._write_lease(0, epoch))
            if taken is not None:
                self._lead(epoch, taken, started)
            return
        node, epoch = lease
        if epoch != self.epoch:
            log.info("relay node %s: following %s (epoch %d)", self.server.node, node, epoch)
            self._drop_local()
            self.epoch, self.leader = epoch, node

    async def _renew(self) -> None:
        started = time.monotonic()
        seq = await self._nats(lambda: self._write_lease(self._lease_seq, self.epoch))
        if seq is None:
            raise StorageUnavailable("this relay node lost its leadership lease")
        self._lease_seq = seq
        self.server.fenced.valid_until = started + self.server.cluster.lease_ttl - (
            self.server.cluster.margin)

    def _lead(self, epoch: int, seq: int, started: float) -> None:
        log.info("relay node %s: leading (epoch %d)", self.server.node, epoch)
        self._drop_local()
        self._lease_seq, self.epoch = seq, epoch
        self.leader = self.server.node
        self.server.fenced.valid_until = started + self.server.cluster.lease_ttl - (
            self.server.cluster.margin)
        snapshot = self.server.fenced.load()
        self.core = RelayCore(
            signing_key=self._key, draw=random, config=self._config, snapshot=snapshot
        )

    def _drop_local(self) -> None:
        """Close every client connection of this node: they resume elsewhere or here."""
        for link in list(self.server.links().values()):
            link.scope.cancel()

    async def _read_lease(self) -> tuple[str, int] | None:
        try:
            msg = await self.server.nats.js.get_last_msg(f"{self.ns}_lease", f"{self.ns}.lease")
        except NotFoundError:
            return None
        node, epoch = (msg.data or b"").decode().split()
        return node, int(epoch)

    async def _write_lease(self, expected: int, epoch: int) -> int | None:
        """Publish the lease if its subject's last seq is ``expected``; the new seq, or None."""
        headers = {"Nats-Expected-Last-Subject-Sequence": str(expected)}
        body = f"{self.server.node} {epoch}".encode()
        try:
            ack = await self.server.nats.js.publish(f"{self.ns}.lease", body, headers=headers)
        except APIError:
            return None
        return int(ack.seq)
