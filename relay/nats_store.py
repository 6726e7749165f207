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

Every NATS call is bounded by ``timeout``. The hot path (the compare-and-set publishes and
purges of :meth:`NatsStorage.acommit`, the feed and presence) runs on a Trio-native client
(:mod:`relay.nats_conn`, started by the node in its own nursery), so a write costs no thread
hand-off; loading, reloads and the synchronous :meth:`NatsStorage.commit` still use nats-py on
an :class:`~relay.aio_bridge.AsyncioThread`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import attrs
import nats
import trio
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
    RemoteProtocolError,
    StorageUnavailable,
)
from relay import nats_wire as wire
from relay.aio_bridge import AsyncioThread
from relay.nats_conn import MIN_SERVER, NatsConnection, server_too_old
from relay.nats_layout import Layout, Outgoing, Stored
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
NO_RESPONDERS = 503  # the status of the server's answer to a request nobody listens for
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


class JetStreamError(Exception):
    """JetStream refused a request (``err_code`` as in its API error)."""

    def __init__(self, err_code: int, description: str) -> None:
        super().__init__(f"{description} ({err_code})")
        self.err_code = err_code


class _JetStream(Protocol):
    """The two calls a commit makes, on whichever client runs it."""

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]: ...

    async def purge(self, subject: str, seq: int | None = None) -> None: ...


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
        # Called in Trio after the Trio client reconnected: what was republished meanwhile is
        # lost (core NATS).
        self.on_reconnect: Callable[[], None] | None = None
        # The hot path's client: its subscriptions may be made before :meth:`run_connection`.
        self.conn = NatsConnection(
            url, timeout=timeout, ping_interval=PING_INTERVAL,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS, on_reconnect=self._conn_reconnected,
        )
        self._trio_js = _TrioJetStream(self.conn, self.layout.stream)
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
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
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

    async def run_connection(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the hot path's Trio client (:attr:`conn`) until cancelled; started once it is
        connected."""
        await self.conn.run(task_status=task_status)

    def _conn_reconnected(self) -> None:
        if self.on_reconnect is not None:
            self.on_reconnect()

    async def last_sequence(self) -> int:
        """The stream's last sequence now (through the Trio client)."""
        reply = await self.conn.request(f"$JS.API.STREAM.INFO.{self.layout.stream}", b"")
        state = _api_answer(reply, "stream info").get("state")
        return int(state.get("last_seq", 0)) if isinstance(state, dict) else 0

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
        js = _PyJetStream(self.js, self.layout.stream)
        self._call(lambda: self._commit(list(writes), "", js))

    async def acommit(self, writes: list[Write], by: str = "") -> None:
        """Store ``writes`` in order, in Trio through :attr:`conn` (which must be running);
        raises :class:`WriteConflict` on a lost compare-and-set (the messages before it are
        stored, the rest are not) and :class:`StorageUnavailable` if NATS does not answer."""
        await self._commit(writes, by, self._trio_js)

    async def _commit(self, writes: list[Write], by: str, js: _JetStream) -> None:
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
                seq, duplicate = await js.publish(out, headers)
            except JetStreamError as exc:
                if exc.err_code in LOST_CAS and out.unit is not None:
                    raise WriteConflict(out.unit) from None
                raise StorageUnavailable(f"JetStream refused {out.subject}: {exc}") from None
            if duplicate and out.unit is not None:
                # Stored before, under an older sequence: only a reload says where it stands.
                raise WriteConflict(out.unit)
            self.tails.saw(seq, Stored(out.unit, list(out.writes)))
            for subject in out.purges:
                await js.purge(subject)
            if out.pruned is not None:
                await self._prune(js, *out.pruned)

    async def _prune(self, js: _JetStream, room: str, through: int) -> None:
        """Purge the room's ops up to room seq ``through``, never its newest op."""
        held = self.tails.ops.get(room)
        if not held:
            return
        later = [s for seq, s in held.items() if seq > through]
        below = min(later) if later else max(held.values())
        if not any(s < below for s in held.values()):
            return
        await js.purge(self.layout.room_ops(room), below)
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


class _PyJetStream:
    """A commit's calls through nats-py (on the asyncio thread: the synchronous ``commit``)."""

    def __init__(self, js: JetStreamContext, stream: str) -> None:
        self.js = js
        self.stream = stream

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]:
        try:
            # No ``stream=``: only this stream takes the subject.
            ack = await self.js.publish(out.subject, out.payload, headers=headers,
                                        msg_ttl=out.ttl)
        except APIError as exc:
            raise JetStreamError(exc.err_code or 0, exc.description or "") from None
        return int(ack.seq), bool(ack.duplicate)

    async def purge(self, subject: str, seq: int | None = None) -> None:
        await self.js.purge_stream(self.stream, subject=subject, seq=seq)


class _TrioJetStream:
    """A commit's calls through the Trio client: a publish is a request whose answer is the
    JSON PubAck (or an API error); a purge is a request to the stream's PURGE API."""

    def __init__(self, conn: NatsConnection, stream: str) -> None:
        self.conn = conn
        self.stream = stream

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]:
        if out.ttl is not None:
            headers["Nats-TTL"] = str(int(out.ttl))  # whole seconds, as the server reads it
        reply = await self.conn.request(out.subject, out.payload, headers)
        ack = _api_answer(reply, out.subject)
        return int(ack["seq"]), ack.get("duplicate") is True

    async def purge(self, subject: str, seq: int | None = None) -> None:
        request: dict[str, object] = {"filter": subject}
        if seq:
            request["seq"] = seq
        reply = await self.conn.request(f"$JS.API.STREAM.PURGE.{self.stream}",
                                        json.dumps(request).encode())
        _api_answer(reply, f"purge of {subject}")


def _api_answer(reply: wire.Msg, what: str) -> dict[str, Any]:
    """The JSON answer of a JetStream request; :class:`JetStreamError` if it is an API error,
    :class:`StorageUnavailable` if no JetStream answered or the answer does not parse."""
    try:
        if reply.headers is not None:
            status = wire.parse_headers(reply.headers).status
            if status == NO_RESPONDERS:
                raise StorageUnavailable(f"no JetStream answered ({what}); is it running?")
            if status is not None:
                raise StorageUnavailable(f"JetStream answered {status} ({what})")
        body = json.loads(reply.payload)
    except (ValueError, wire.NatsProtocolError) as exc:
        raise StorageUnavailable(f"JetStream's answer ({what}) does not parse: {exc}") from None
    if not isinstance(body, dict):
        raise StorageUnavailable(f"JetStream's answer ({what}) is not an object")
    error = body.get("error")
    if isinstance(error, dict):
        raise JetStreamError(int(error.get("err_code") or 0), str(error.get("description")))
    return body


__all__ = ["MIN_SERVER", "JetStreamError", "NatsStorage", "NotFoundError", "StreamMessage",
           "Tails", "WriteConflict", "server_too_old"]
