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

Every NATS call is bounded by ``timeout`` and goes through the Trio client
(:mod:`relay.nats_conn`): the node's own connection (:attr:`NatsStorage.conn`, started by the
node in its nursery) for everything a running node does (compare-and-set publishes and purges,
reloads, device lookups, the feed and presence), and a connection on a Trio thread of its own
(:class:`_SyncClient`) for the synchronous calls made before Trio runs (creating the stream,
the relay key, the first load) and for :meth:`NatsStorage.commit`; a node closes that one once
it has started. Reads that decide something (a load or reload, the last message of a subject)
go to the stream leader: a scan reads through an ephemeral pull consumer, a single message
through ``$JS.API.STREAM.MSG.GET`` (never a direct get, which a lagging replica may answer).
A request the server answers with "no responders" (status 503: it reached no one, so nothing
was done) is made again, backing off, for up to ``timeout`` seconds in a row: that is what a
stream electing a leader answers, and what a new consumer answers until its interest has
crossed a cluster's routes. So a node rides out an election instead of failing its requests.
"""

from __future__ import annotations

import base64
import collections
import concurrent.futures
import itertools
import json
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

import attrs
import trio

from crosstalk.errors import (
    DamagedState,
    RemoteProtocolError,
    StorageUnavailable,
)
from relay import nats_wire as wire
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

T = TypeVar("T")
FETCH_BATCH = 512
MAX_MESSAGE = 8 * 1024 * 1024  # the server's max_payload must allow a 1 MiB op plus headers
NO_RESPONDERS = 503  # the status of the server's answer to a request nobody listens for
WRONG_LAST_SEQUENCE = 10071
# The same refusal without the sequence in its text: what nats-server 2.11+ answers when the
# ``...-Subject`` check (a room's wildcard subject) fails. Both are a lost compare-and-set.
WRONG_LAST_SEQUENCE_CONSTANT = 10164
LOST_CAS = frozenset({WRONG_LAST_SEQUENCE, WRONG_LAST_SEQUENCE_CONSTANT})
DUPLICATE_WINDOW = 120.0  # seconds JetStream remembers a Nats-Msg-Id
NANOS = 1_000_000_000  # JetStream's API counts durations in nanoseconds
NO_MESSAGE = 10037  # a get found no message on the subject
SCAN_IDLE = 30.0  # seconds after which the server removes a scan's consumer left behind
NO_RESPONDERS_BACKOFF = 0.01  # seconds before asking again when no one answered, doubling ...
NO_RESPONDERS_BACKOFF_MAX = 0.25  # ... up to this (for at most ``timeout`` seconds in a row)
# A server that stops answering (frozen, or cut off without a reset) is left after this many
# seconds times MAX_OUTSTANDING_PINGS; a client library's usual default (two minutes per ping)
# would keep a node on a frozen server, failing every write, for minutes.
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


class JetStream(Protocol):
    """The JetStream calls the relay makes (:class:`TrioJetStream`, or the simulation's
    in-memory stream in tests/sim/nats_stream.py)."""

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]: ...

    async def purge(self, subject: str, seq: int | None = None) -> None: ...

    async def add_stream(self, config: dict[str, Any]) -> None: ...

    async def get_last(self, subject: str) -> StreamMessage | None: ...

    async def scan(self, subject: str) -> list[StreamMessage]: ...

    async def last_sequence(self) -> int: ...


class NodeConnection(Protocol):
    """The core NATS calls a node makes on its own connection (:class:`NatsConnection`)."""

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None,
                      reply: str | None = None) -> None: ...

    def subscribe(self, subject: str, callback: Callable[[wire.Msg], None]) -> str: ...

    def unsubscribe(self, sid: str) -> None: ...

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
                  ) -> None: ...


class Backend(Protocol):
    """Where a :class:`NatsStorage` sends its calls instead of a NATS server: the seam the
    simulation (tests/sim/nats_stream.py) plugs its in-memory stream into."""

    def connection(self, on_reconnect: Callable[[], None]) -> tuple[NodeConnection, JetStream]:
        """The node's own connection and the JetStream calls made on it."""
        ...

    def call(self, work: Callable[[JetStream], Awaitable[T]]) -> T:
        """Run ``work`` to its end from synchronous code (before the node runs in Trio)."""
        ...


class NatsStorage:
    """:class:`relay.storage.RelayStorage` on a NATS JetStream server (or cluster)."""

    def __init__(
        self, url: str, *, namespace: str = "crosstalk", timeout: float = 5.0, replicas: int = 1,
        clock: Callable[[], float] = time.time, backend: Backend | None = None,
    ) -> None:
        self.url = url
        self._backend = backend  # None: a NATS server at ``url`` (the simulation passes one)
        self.namespace = namespace
        self.timeout = timeout
        self.replicas = replicas
        self.layout = Layout(namespace)
        self._clock = clock  # wall-clock seconds: slots and grants expired by it are not loaded
        self.tails = Tails()
        self.loaded_through = 0  # the last stream seq the last full load read
        # Called in Trio after the Trio client reconnected: what was republished meanwhile is
        # lost (core NATS).
        self.on_reconnect: Callable[[], None] | None = None
        # The node's client: its subscriptions may be made before :meth:`run_connection`.
        self.conn: NodeConnection
        self.js: JetStream
        if backend is None:
            conn = self._connection(on_reconnect=self._conn_reconnected)
            self.conn, self.js = conn, TrioJetStream(conn, self.layout.stream, timeout)
        else:
            self.conn, self.js = backend.connection(self._conn_reconnected)
        self._sync: _SyncClient | None = None
        try:
            self._call(self._create_stream)
        except BaseException:
            self.close()
            raise

    # --- plumbing -------------------------------------------------------------------------------

    def _connection(self, on_reconnect: Callable[[], None] | None = None) -> NatsConnection:
        return NatsConnection(
            self.url, timeout=self.timeout, ping_interval=PING_INTERVAL,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS, on_reconnect=on_reconnect,
        )

    def _call(self, work: Callable[[JetStream], Awaitable[T]]) -> T:
        """Run ``work`` on the synchronous client's connection (started if need be) and wait."""
        if self._backend is not None:
            return self._backend.call(work)
        if self._sync is None:
            conn = self._connection()
            self._sync = _SyncClient(conn, TrioJetStream(conn, self.layout.stream, self.timeout))
        return self._sync.call(work, self.timeout * 4)

    def end_startup(self) -> None:
        """Close the synchronous client's connection (a node's own :attr:`conn` goes on); a
        later synchronous call opens it again."""
        if self._sync is not None:
            sync, self._sync = self._sync, None
            sync.close()

    async def _create_stream(self, js: JetStream) -> None:
        lay = self.layout
        await js.add_stream({
            "name": lay.stream, "subjects": [f"{lay.root}.>"], "retention": "limits",
            "storage": "file", "num_replicas": self.replicas, "max_msg_size": MAX_MESSAGE,
            "allow_rollup_hdrs": True, "allow_msg_ttl": True, "allow_direct": True,
            "duplicate_window": int(DUPLICATE_WINDOW * NANOS), "discard": "old",
            "republish": {"src": f"{lay.root}.>", "dest": f"{lay.republished}.>"},
        })

    async def run_connection(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run the node's Trio client (:attr:`conn`) until cancelled; started once it is
        connected."""
        await self.conn.run(task_status=task_status)

    def _conn_reconnected(self) -> None:
        if self.on_reconnect is not None:
            self.on_reconnect()

    async def last_sequence(self) -> int:
        """The stream's last sequence now (through the node's client)."""
        return await self.js.last_sequence()

    # --- the relay key --------------------------------------------------------------------------

    def ensure_key(self, public: bytes) -> bytes:
        """Record ``public`` as the cluster's relay key unless one is; the recorded key."""
        subject = self.layout.key_subject()

        async def run(js: JetStream) -> bytes:
            out = Outgoing(subject, public, {})
            try:
                await js.publish(out, {"Nats-Expected-Last-Subject-Sequence": "0"})
                return public
            except JetStreamError as exc:
                if exc.err_code not in LOST_CAS:
                    raise StorageUnavailable(f"JetStream refused {subject}: {exc}") from None
            found = await js.get_last(subject)
            return found.data if found is not None else b""

        return self._call(run)

    # --- load -----------------------------------------------------------------------------------

    def load(self) -> Snapshot:
        messages = self._call(lambda js: js.scan(f"{self.layout.root}.>"))
        snapshot, self.tails = self.assemble(messages)
        self.loaded_through = max((m.seq for m in messages), default=0)
        return snapshot

    async def areload(self, unit: str) -> tuple[Snapshot, Tails]:
        """The stored state of one unit (for a room: with its cursors), as of its last seq."""
        lay = self.layout
        messages = await self.js.scan(lay.unit_subject(unit))
        if unit.startswith("r."):
            messages += await self.js.scan(f"{lay.root}.c.{unit[2:]}.>")
        return self.assemble(messages)

    async def adevice(self, fp: str, device: str) -> list[Write]:
        """A device as stored (its record and its cursors), or [] if it is not stored."""
        root = self.layout.root
        if await self.js.get_last(f"{root}.d.{fp}.{device}") is None:
            return []
        writes: list[Write] = [DevicePut(fp, device)]
        for m in await self.js.scan(f"{root}.c.*.{fp}.{device}"):
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

    # --- commit ---------------------------------------------------------------------------------

    def commit(self, writes: Sequence[Write]) -> None:
        self._call(lambda js: self._commit(list(writes), "", js))

    async def acommit(self, writes: list[Write], by: str = "") -> None:
        """Store ``writes`` in order, in Trio through :attr:`conn` (which must be running);
        raises :class:`WriteConflict` on a lost compare-and-set (the messages before it are
        stored, the rest are not) and :class:`StorageUnavailable` if NATS does not answer."""
        await self._commit(writes, by, self.js)

    async def _commit(self, writes: list[Write], by: str, js: JetStream) -> None:
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

    async def _prune(self, js: JetStream, room: str, through: int) -> None:
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
        self.end_startup()


def _replay(model: MemoryStorage, w: Write) -> None:
    """Apply one stored write to the model; a write whose slot or room is gone is skipped (its
    opening aged out by TTL, or a purge was cut short by a crash)."""
    try:
        model.commit([w])
    except KeyError:
        pass


class _SyncClient:
    """A Trio NATS connection on a thread of its own, for callers that are not in Trio or may
    block it (a node before it runs, the storage tests): :meth:`call` runs a coroutine there and
    blocks the calling thread until it is done."""

    def __init__(self, conn: NatsConnection, js: TrioJetStream) -> None:
        self.conn = conn
        self.js = js
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._started = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=trio.run, args=(self._main,), name="nats-sync",
                                        daemon=True)
        self._thread.start()
        self._started.wait()
        if self._failed is not None:
            self._thread.join()
            raise self._failed

    async def _main(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.conn.run)
                self._token = trio.lowlevel.current_trio_token()
                self._nursery = nursery
                self._started.set()
        except BaseException as exc:  # the first connection failed: the caller raises it
            while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
                exc = exc.exceptions[0]  # the nursery's wrapping of the one error
            if not isinstance(exc, trio.Cancelled):
                self._failed = exc
        finally:
            self._started.set()

    def call(self, work: Callable[[TrioJetStream], Awaitable[T]], limit: float) -> T:
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        async def run() -> None:
            try:
                with trio.fail_after(limit):
                    result = await work(self.js)
            except trio.TooSlowError:
                done.set_exception(StorageUnavailable(f"no answer from NATS within {limit} s"))
            except trio.Cancelled:
                done.set_exception(StorageUnavailable("the NATS client is closed"))
                raise
            except Exception as exc:  # handed to the caller whole
                done.set_exception(exc)
            else:
                done.set_result(result)

        assert self._token is not None and self._nursery is not None
        try:
            self._token.run_sync_soon(self._nursery.start_soon, run)
        except trio.RunFinishedError:
            raise StorageUnavailable("the NATS client is closed") from None
        try:
            return done.result(limit + 1.0)
        except concurrent.futures.TimeoutError:
            raise StorageUnavailable(f"no answer from NATS within {limit} s") from None

    def close(self) -> None:
        if self._token is not None and self._nursery is not None:
            try:
                self._token.run_sync_soon(self._nursery.cancel_scope.cancel)
            except trio.RunFinishedError:
                pass
        self._thread.join(10.0)


class TrioJetStream:
    """The JetStream API calls the relay makes, on one Trio connection: a publish is a request
    whose answer is the JSON PubAck (or an API error); the rest are requests to ``$JS.API``."""

    def __init__(self, conn: NatsConnection, stream: str, timeout: float) -> None:
        self.conn = conn
        self.stream = stream
        self.timeout = timeout
        self._deliver = f"_INBOX.{secrets.token_hex(8)}.scan."  # one token more than replies
        self._scans = itertools.count(1)

    async def api(self, subject: str, request: dict[str, Any], what: str) -> dict[str, Any]:
        """A ``$JS.API`` request; :class:`JetStreamError` if it answers with an API error."""
        return _api_answer(await self._request(subject, json.dumps(request).encode()), what)

    async def publish(self, out: Outgoing, headers: dict[str, str]) -> tuple[int, bool]:
        if out.ttl is not None:
            headers["Nats-TTL"] = str(int(out.ttl))  # whole seconds, as the server reads it
        reply = await self._request(out.subject, out.payload, headers)
        ack = _api_answer(reply, out.subject)
        return int(ack["seq"]), ack.get("duplicate") is True

    async def purge(self, subject: str, seq: int | None = None) -> None:
        request: dict[str, Any] = {"filter": subject}
        if seq:
            request["seq"] = seq
        await self.api(f"$JS.API.STREAM.PURGE.{self.stream}", request, f"purge of {subject}")

    async def last_sequence(self) -> int:
        """The stream's last sequence now."""
        info = await self.api(f"$JS.API.STREAM.INFO.{self.stream}", {}, "stream info")
        state = info.get("state")
        return int(state.get("last_seq", 0)) if isinstance(state, dict) else 0

    async def add_stream(self, config: dict[str, Any]) -> None:
        """Create the stream, or find it as it is (the same configuration)."""
        try:
            await self.api(f"$JS.API.STREAM.CREATE.{self.stream}", config, "stream create")
        except JetStreamError as exc:
            raise StorageUnavailable(f"JetStream refused the stream {self.stream}: {exc}") from None

    async def get_last(self, subject: str) -> StreamMessage | None:
        """The last message on ``subject`` as the stream leader has it (None if there is none)."""
        try:
            answer = await self.api(f"$JS.API.STREAM.MSG.GET.{self.stream}",
                                    {"last_by_subj": subject}, f"get of {subject}")
        except JetStreamError as exc:
            if exc.err_code == NO_MESSAGE:
                return None
            raise StorageUnavailable(f"JetStream refused a get of {subject}: {exc}") from None
        try:
            m = answer["message"]
            raw = base64.b64decode(m.get("hdrs") or "")
            headers = wire.parse_headers(raw).fields if raw else {}
            return StreamMessage(int(m["seq"]), str(m["subject"]), headers,
                                 base64.b64decode(m.get("data") or ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise StorageUnavailable(f"JetStream's get of {subject} does not parse: {exc}"
                                     ) from None

    async def _request(self, subject: str, payload: bytes,
                       headers: dict[str, str] | None = None) -> wire.Msg:
        """A request, made again while the server answers that no one listens on ``subject``
        (status 503): while a stream elects a leader no server takes its publishes (measured:
        about 7 s of these after kill -9 of the leader, on a loaded machine), and a consumer's
        or the API's interest may not have reached this server yet. Such an answer means the
        request reached no one, so nothing was stored and asking again is safe (a publish
        carries the same ``Nats-Msg-Id`` and expected sequence anyway). After ``timeout``
        seconds of them in a row the last one is returned (the caller's StorageUnavailable)."""
        unheard = _Unheard(self.timeout)
        while True:
            reply = await self.conn.request(subject, payload, headers)
            if _status(reply) != NO_RESPONDERS or not await unheard.wait():
                return reply

    async def scan(self, subject: str) -> list[StreamMessage]:
        """Every stored message on ``subject`` (a wildcard allowed), in stream order, read
        through an ephemeral pull consumer (the stream leader's order, not a replica's)."""
        config = {"deliver_policy": "all", "ack_policy": "none", "filter_subject": subject,
                  "inactive_threshold": int(SCAN_IDLE * NANOS), "mem_storage": True,
                  "num_replicas": 1}
        try:
            made = await self.api(f"$JS.API.CONSUMER.CREATE.{self.stream}",
                                  {"stream_name": self.stream, "config": config},
                                  f"a consumer for {subject}")
        except JetStreamError as exc:
            raise StorageUnavailable(f"JetStream refused a scan of {subject}: {exc}") from None
        name = str(made.get("name", ""))
        try:
            if not made.get("num_pending"):
                return []
            return await self._fetch_all(name, subject)
        finally:
            with trio.move_on_after(self.timeout) as scope:
                scope.shield = True
                try:
                    await self.conn.request(f"$JS.API.CONSUMER.DELETE.{self.stream}.{name}",
                                            b"")
                except StorageUnavailable:
                    pass  # the server removes it once idle (SCAN_IDLE)

    async def _fetch_all(self, name: str, subject: str) -> list[StreamMessage]:
        """Ask the consumer for batches until it has delivered everything pending.

        A request for a batch may find no responder (status 503) for a moment: the consumer
        listens on the server that hosts it, and in a cluster that interest reaches the server
        this node is connected to over the routes, apart from the answer that created the
        consumer (measured: about one scan in eight at start-up, on a loaded machine); its
        leader may also be moving. So the request is made again, backing off, for at most
        ``timeout`` seconds in a row before the scan fails."""
        deliver = f"{self._deliver}{next(self._scans)}"
        deliveries = _Deliveries()
        sid = self.conn.subscribe(deliver, deliveries.take)
        out: list[StreamMessage] = []
        unheard = _Unheard(self.timeout)
        try:
            while True:
                await self.conn.publish(
                    f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{name}",
                    json.dumps({"batch": FETCH_BATCH, "no_wait": True}).encode(), reply=deliver)
                batch = await self._take_batch(deliveries, subject, out)
                if batch == "done":
                    return out
                if batch == "more":
                    unheard = _Unheard(self.timeout)
                elif not await unheard.wait():
                    raise StorageUnavailable(f"JetStream answered {NO_RESPONDERS} scanning "
                                             f"{subject} for {self.timeout} s")
        except (ValueError, wire.NatsProtocolError) as exc:
            raise StorageUnavailable(f"a scan of {subject} does not parse: {exc}") from None
        finally:
            self.conn.unsubscribe(sid)

    async def _take_batch(self, deliveries: _Deliveries, subject: str,
                          out: list[StreamMessage]) -> Literal["done", "more", "unheard"]:
        """Take one batch's deliveries into ``out``: ``"done"`` once nothing is pending (or
        what was is gone: purged or expired meanwhile), ``"more"`` if another batch is needed,
        ``"unheard"`` if the request found no responder."""
        got = 0
        while got < FETCH_BATCH:
            msg = await deliveries.next(self.timeout, subject)
            if msg.reply is None or not msg.reply.startswith("$JS.ACK."):
                status = _status(msg)
                if status in (404, 408):  # nothing more for this request
                    break
                if status == NO_RESPONDERS and not got:
                    return "unheard"
                raise StorageUnavailable(f"JetStream answered {status} scanning {subject}")
            seq, left = _acked(msg.reply)
            headers = wire.parse_headers(msg.headers).fields if msg.headers else {}
            out.append(StreamMessage(seq, msg.subject, headers, msg.payload))
            got += 1
            if left == 0:
                return "done"
        return "more" if got else "done"


class _Unheard:
    """Backing off between requests that found no responder, for at most ``limit`` seconds
    from the first."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.since: float | None = None
        self.delay = NO_RESPONDERS_BACKOFF

    async def wait(self) -> bool:
        """Back off before asking again; False (at once) once ``limit`` has passed."""
        now = trio.current_time()
        if self.since is None:
            self.since = now
        elif now - self.since >= self.limit:
            return False
        await trio.sleep(self.delay)  # the responder is on its way (an election, a route)
        self.delay = min(self.delay * 2, NO_RESPONDERS_BACKOFF_MAX)
        return True


class _Deliveries:
    """What a scan's consumer delivered, in order, taken from the reader task's callback."""

    def __init__(self) -> None:
        self.arrived: collections.deque[wire.Msg] = collections.deque()
        self.wake = trio.Event()

    def take(self, msg: wire.Msg) -> None:
        self.arrived.append(msg)
        self.wake.set()

    async def next(self, limit: float, subject: str) -> wire.Msg:
        if not self.arrived:
            self.wake = trio.Event()
            with trio.move_on_after(limit):
                await self.wake.wait()
            if not self.arrived:
                raise StorageUnavailable(f"no answer from NATS scanning {subject} within "
                                         f"{limit} s")
        return self.arrived.popleft()


def _status(msg: wire.Msg) -> int | None:
    return wire.parse_headers(msg.headers).status if msg.headers else None


def _acked(reply: str) -> tuple[int, int]:
    """The stream sequence and the consumer's pending count in a delivered message's reply
    subject: ``$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>``, or the
    newer form with ``<domain>.<account hash>`` after ``ACK`` and a token at the end."""
    tokens = reply.split(".")
    if len(tokens) == 9:
        tokens[2:2] = ["_", "_"]
    if len(tokens) < 11:
        raise ValueError(f"not a JetStream delivery: {reply!r}")
    return int(tokens[7]), int(tokens[10])


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


__all__ = ["MIN_SERVER", "Backend", "JetStream", "JetStreamError", "NatsStorage", "NodeConnection",
           "StreamMessage", "Tails", "TrioJetStream", "WriteConflict", "server_too_old"]
