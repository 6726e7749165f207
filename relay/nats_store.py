"""Relay storage on NATS JetStream: room logs in a stream, everything else in a KV bucket.

Theory of operation
-------------------
Layout, for a namespace ``N`` (default ``crosstalk``; tests use one per case):

* stream ``N_log``, subjects ``N.log.<room>``: one message per held op, the body as payload and
  seq, sender, op id (base64) and timestamp as headers. Room seqs are the core's per-room counter,
  not JetStream's stream sequence: the counter must survive pruning and stay dense per room, and
  JetStream's sequence is shared by every room in the stream. The counter is kept consistent by
  storing it (``head.<room>``) next to each append and by taking ``max(head, last op seq)`` at
  load. Pruning a prefix is one purge of the room's subject keeping ``head - through`` messages.
* KV bucket ``N_state`` (history 1): ``room.<room>`` (the room exists), ``head.<room>``,
  ``member.<room>.<fp>`` (JSON roster entry), ``device.<fp>.<device>``,
  ``cursor.<room>.<fp>.<device>``. Room, device and fingerprint ids are ``[A-Za-z0-9_-]``, so
  they are safe KV tokens. Deleting a member or a room is one purge per subject wildcard.
* KV bucket ``N_slots`` (history 1, ``max_age`` :data:`SLOT_KEEP`, longer than a slot or a
  pairing grant lives): ``slot.<number>.open`` (owner and exact expiry, JSON),
  ``slot.<number>.joiner`` (the spent join, JSON), ``slot.<number>.part.<side>.<index>`` (raw
  bytes) and ``grant.<a>.<b>`` (expiry). JetStream's age limit is per bucket and counts from each
  message's publication, so it only sweeps up what no relay removed; the exact expiry is in the
  value and :meth:`NatsStorage.load` skips anything expired by its ``clock``, and a slot whose
  ``open`` key is gone. Opening a number first purges ``slot.<number>.>`` (leftovers of an expired
  slot whose ``open`` aged out first); removing a slot is that same one purge.

Atomicity. JetStream 2.9 has no multi-message transaction, so a batch is applied in order as
segments: KV puts of a segment are coalesced per key (last write wins) and published pipelined
with the room's ops (in order per room); writes that need a purge end a segment and run after
everything before them is acknowledged. ``commit`` returns only when every write is
acknowledged, so "durable before sent" holds. A crash mid-batch can leave a prefix of a batch's
keys; that is harmless because the shell sent nothing of that batch, and ``room.<room>`` is the
authority: keys of a room without it are ignored at load and purged when the room is created
again.

Single writer. The in-memory index (heads, rooms) is only right while one relay writes a
namespace; :mod:`relay.cluster` makes sure exactly one node does (the leader).

Every NATS call is bounded by ``timeout`` and runs on an :class:`~relay.aio_bridge.AsyncioThread`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from crosstalk.errors import DamagedState, RemoteProtocolError, StorageUnavailable
from crosstalk.wire.converter import structure_remote, unstructure
from crosstalk.wire.relay import Member, Side
from relay.aio_bridge import AsyncioThread
from relay.limits import RelayConfig
from relay.storage import (
    CursorPut,
    DevicePut,
    GrantDeleted,
    GrantPut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    Peer,
    RoomDeleted,
    RoomPut,
    RoomRecord,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRecord,
    SlotRemoved,
    Snapshot,
    StoredOp,
    Write,
)

FETCH_BATCH = 512
MAX_MESSAGE = 8 * 1024 * 1024  # the server's max_payload must allow a 1 MiB op plus headers
_DEFAULTS = RelayConfig()
# How long the slots bucket keeps a message: past the longest a slot or a grant can live (a
# minute of slack for clock skew between nodes), so the age limit never removes a live one.
SLOT_KEEP = max(_DEFAULTS.slot_ttl, _DEFAULTS.grant_ttl) + 60.0


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
        self._own_bridge = bridge is None
        self.bridge = bridge or AsyncioThread()
        self._log = f"{namespace}_log"
        self._bucket = f"{namespace}_state"
        self._slots = f"{namespace}_slots"
        self._clock = clock  # wall-clock seconds: slots and grants expired by it are not loaded
        self._heads: dict[str, int] = {}
        # Called on the asyncio thread after the NATS connection came back (messages published
        # while it was down may be lost): relay.cluster drops its client connections then.
        self.on_reconnect: list[Callable[[], None]] = []
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
            max_reconnect_attempts=-1, allow_reconnect=True, reconnected_cb=self._reconnected,
        )
        self._js = self._nc.jetstream(timeout=self.timeout)
        await self.js.add_stream(StreamConfig(
            name=self._log, subjects=[f"{self.namespace}.log.>"], storage=StorageType.FILE,
            num_replicas=self.replicas, max_msg_size=MAX_MESSAGE,
        ))
        await self.js.add_stream(StreamConfig(
            name=f"KV_{self._bucket}", subjects=[f"$KV.{self._bucket}.>"],
            storage=StorageType.FILE, num_replicas=self.replicas, max_msgs_per_subject=1,
            allow_rollup_hdrs=True, deny_delete=True, allow_direct=True,
        ))
        await self.js.add_stream(StreamConfig(
            name=f"KV_{self._slots}", subjects=[f"$KV.{self._slots}.>"],
            storage=StorageType.FILE, num_replicas=self.replicas, max_msgs_per_subject=1,
            max_age=SLOT_KEEP, allow_rollup_hdrs=True, deny_delete=True, allow_direct=True,
        ))

    async def _reconnected(self) -> None:
        for callback in list(self.on_reconnect):
            callback()

    def _kv(self, key: str) -> str:
        return f"$KV.{self._bucket}.{key}"

    def _skv(self, key: str) -> str:
        return f"$KV.{self._slots}.{key}"

    def _stream_of(self, subject: str) -> str:
        if subject.startswith(f"{self.namespace}."):
            return self._log
        if subject.startswith(f"$KV.{self._slots}."):
            return f"KV_{self._slots}"
        return f"KV_{self._bucket}"

    # --- load -----------------------------------------------------------------------------------

    def load(self) -> Snapshot:
        state: list[Msg] = self._call(lambda: self._scan(f"KV_{self._bucket}", True))
        ops: list[Msg] = self._call(lambda: self._scan(self._log, False))
        slots: list[Msg] = self._call(lambda: self._scan(f"KV_{self._slots}", True))
        try:
            snapshot = self._assemble(state, ops)
            records, grants = self._assemble_slots(slots, self._clock())
            return attrs.evolve(snapshot, slots=records, grants=grants)
        except (KeyError, IndexError, ValueError, TypeError, RemoteProtocolError) as exc:
            raise DamagedState(f"relay state in NATS ({self.namespace}) does not parse: {exc}; "
                               "restore the streams from a backup") from None

    async def _scan(self, stream: str, last_per_subject: bool) -> list[Msg]:
        info = await self.js.stream_info(stream)
        if info.state.messages == 0:
            return []
        policy = DeliverPolicy.LAST_PER_SUBJECT if last_per_subject else DeliverPolicy.ALL
        config = ConsumerConfig(
            deliver_policy=policy, ack_policy=AckPolicy.NONE, inactive_threshold=30.0,
        )
        sub = await self.js.pull_subscribe(">", stream=stream, config=config)
        out: list[Msg] = []
        try:
            if (await sub.consumer_info()).num_pending == 0:
                return out
            while True:
                batch = await sub.fetch(FETCH_BATCH, timeout=self.timeout)
                out.extend(batch)
                if batch[-1].metadata.num_pending == 0:
                    return out
        finally:
            await sub.unsubscribe()

    def _assemble(self, state: list[Msg], ops: list[Msg]) -> Snapshot:
        prefix = len(f"$KV.{self._bucket}.")
        rooms: set[str] = set()
        heads: dict[str, int] = {}
        members: dict[str, list[Member]] = {}
        devices: list[DevicePut] = []
        cursors: list[CursorPut] = []
        for msg in state:
            if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
                continue
            kind, *parts = msg.subject[prefix:].split(".")
            if kind == "room":
                rooms.add(parts[0])
            elif kind == "head":
                heads[parts[0]] = int(msg.data)
            elif kind == "member":
                member = structure_remote(json.loads(msg.data), Member)
                members.setdefault(parts[0], []).append(member)
            elif kind == "device":
                devices.append(DevicePut(parts[0], parts[1]))
            elif kind == "cursor":
                cursors.append(CursorPut(parts[1], parts[2], parts[0], int(msg.data)))
        logs: dict[str, list[StoredOp]] = {}
        for msg in ops:
            room = msg.subject[len(f"{self.namespace}.log."):]
            logs.setdefault(room, []).append(_op_from(msg))
        records = []
        for room in sorted(rooms):
            log = logs.get(room, [])
            head = max([heads.get(room, 0), *(op.seq for op in log)])
            records.append(RoomRecord(room, head, members.get(room, []), log))
        self._heads = {r.room: r.head for r in records}
        cursors = [c for c in cursors if c.room in rooms]
        return Snapshot(records, devices, cursors)

    def _assemble_slots(
        self, msgs: list[Msg], now: float
    ) -> tuple[list[SlotRecord], list[GrantPut]]:
        prefix = len(f"$KV.{self._slots}.")
        opened: dict[str, tuple[Peer, float]] = {}
        joiners: dict[str, Peer] = {}
        parts: dict[str, list[SlotPartPut]] = {}
        grants: list[GrantPut] = []
        for msg in msgs:
            if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
                continue
            kind, *key = msg.subject[prefix:].split(".")
            if kind == "grant" and float(msg.data) > now:
                grants.append(GrantPut(key[0], key[1], float(msg.data)))
            elif kind == "slot" and key[1] == "open":
                fields = json.loads(msg.data)
                opened[key[0]] = (_peer_from(fields), float(fields["exp"]))
            elif kind == "slot" and key[1] == "joiner":
                joiners[key[0]] = _peer_from(json.loads(msg.data))
            elif kind == "slot" and key[1] == "part":
                side: Side = "owner" if key[2] == "owner" else "joiner"
                part = SlotPartPut(key[0], side, int(key[3]), msg.data)
                parts.setdefault(key[0], []).append(part)
        records = [
            SlotRecord(number, owner, expires_at, joiners.get(number),
                       sorted(parts.get(number, []), key=lambda p: (p.side, p.index)))
            for number, (owner, expires_at) in sorted(opened.items()) if expires_at > now
        ]
        return records, sorted(grants, key=lambda g: (g.a, g.b))

    # --- commit ---------------------------------------------------------------------------------

    def commit(self, writes: Sequence[Write]) -> None:
        self._call(lambda: self._commit(writes))

    async def _commit(self, writes: Sequence[Write]) -> None:
        puts: dict[str, bytes] = {}
        ops: dict[str, list[StoredOp]] = {}
        for write in writes:
            purges = self._purges_for(write)
            if purges:
                await self._flush(puts, ops)
                puts, ops = {}, {}
                await _gather([self._purge(subject, keep) for subject, keep in purges])
            self._plan(write, puts, ops)
        await self._flush(puts, ops)

    def _purges_for(self, w: Write) -> list[tuple[str, int | None]]:
        """Subjects to purge before ``w`` applies (and how many messages to keep)."""
        kv = self._kv
        if isinstance(w, RoomPut):
            if w.room in self._heads:
                return []
            self._heads[w.room] = 0  # a new room: clear whatever a torn deletion left
            return self._room_subjects(w.room)
        if isinstance(w, RoomDeleted):
            self._heads.pop(w.room, None)
            return [(kv(f"room.{w.room}"), None), *self._room_subjects(w.room)]
        if isinstance(w, MemberDeleted):
            return [(kv(f"member.{w.room}.{w.fingerprint}"), None),
                    (kv(f"cursor.{w.room}.{w.fingerprint}.*"), None)]
        if isinstance(w, OpsPruned):
            return [(self._log_subject(w.room), max(0, self._heads.get(w.room, 0) - w.through))]
        if isinstance(w, SlotOpened | SlotRemoved):
            return [(self._skv(f"slot.{w.number}.>"), None)]
        if isinstance(w, GrantDeleted):
            return [(self._skv(f"grant.{w.a}.{w.b}"), None)]
        return []

    def _room_subjects(self, room: str) -> list[tuple[str, int | None]]:
        kv = self._kv
        return [(kv(f"head.{room}"), None), (kv(f"member.{room}.*"), None),
                (kv(f"cursor.{room}.>"), None), (self._log_subject(room), None)]

    def _log_subject(self, room: str) -> str:
        return f"{self.namespace}.log.{room}"

    def _plan(self, w: Write, puts: dict[str, bytes], ops: dict[str, list[StoredOp]]) -> None:
        """Adds ``w``'s KV puts (by full subject) and log appends to this segment."""
        kv = self._kv
        if isinstance(w, RoomPut):
            puts[kv(f"room.{w.room}")] = b"1"
        elif isinstance(w, MemberPut):
            member = json.dumps(unstructure(w.member), separators=(",", ":")).encode()
            puts[kv(f"member.{w.room}.{w.member.fingerprint}")] = member
        elif isinstance(w, OpAppended):
            ops.setdefault(w.room, []).append(w.op)
            puts[kv(f"head.{w.room}")] = str(w.op.seq).encode()
            self._heads[w.room] = w.op.seq
        elif isinstance(w, DevicePut):
            puts[kv(f"device.{w.fingerprint}.{w.device}")] = b"1"
        elif isinstance(w, CursorPut):
            puts[kv(f"cursor.{w.room}.{w.fingerprint}.{w.device}")] = str(w.seq).encode()
        else:
            self._plan_slot(w, puts)

    def _plan_slot(self, w: Write, puts: dict[str, bytes]) -> None:
        skv = self._skv
        if isinstance(w, SlotOpened):
            puts[skv(f"slot.{w.number}.open")] = _json({**_peer_fields(w.owner),
                                                         "exp": w.expires_at})
        elif isinstance(w, SlotFilled):
            puts[skv(f"slot.{w.number}.joiner")] = _json(_peer_fields(w.joiner))
        elif isinstance(w, SlotPartPut):
            puts[skv(f"slot.{w.number}.part.{w.side}.{w.index}")] = w.data
        elif isinstance(w, GrantPut):
            puts[skv(f"grant.{w.a}.{w.b}")] = repr(w.expires_at).encode()

    async def _flush(self, puts: dict[str, bytes], ops: dict[str, list[StoredOp]]) -> None:
        work: list[Awaitable[Any]] = [
            self.js.publish(subject, value, stream=self._stream_of(subject))
            for subject, value in puts.items()
        ]
        work.extend(self._append(room, room_ops) for room, room_ops in ops.items())
        await _gather(work)

    async def _append(self, room: str, room_ops: list[StoredOp]) -> None:
        for op in room_ops:  # in order within a room; rooms go in parallel
            headers = {"Ct-Seq": str(op.seq), "Ct-Sender": op.sender, "Ct-Ts": repr(op.ts),
                       "Ct-Op": base64.urlsafe_b64encode(op.op_id.encode()).decode()}
            await self.js.publish(self._log_subject(room), op.body, stream=self._log,
                                  headers=headers)

    async def _purge(self, subject: str, keep: int | None) -> None:
        await self.js.purge_stream(self._stream_of(subject), subject=subject, keep=keep or None)

    def close(self) -> None:
        if self._nc is not None:
            nc, self._nc = self._nc, None
            try:
                self.bridge.call(nc.close, self.timeout)
            except (TimeoutError, NatsError, OSError):
                pass
        if self._own_bridge:
            self.bridge.close()


async def _gather(work: list[Awaitable[Any]]) -> None:
    if work:
        await asyncio.gather(*work)


def _op_from(msg: Msg) -> StoredOp:
    h = msg.headers or {}
    op_id = base64.urlsafe_b64decode(h["Ct-Op"].encode()).decode()
    return StoredOp(int(h["Ct-Seq"]), h["Ct-Sender"], op_id, msg.data, float(h["Ct-Ts"]))


def _json(fields: dict[str, Any]) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode()


def _peer_fields(peer: Peer) -> dict[str, Any]:
    return {"fp": peer.fingerprint, "ed": base64.b64encode(peer.ed_pub).decode(),
            "x": base64.b64encode(peer.x_pub).decode()}


def _peer_from(fields: dict[str, Any]) -> Peer:
    return Peer(str(fields["fp"]), base64.b64decode(fields["ed"]), base64.b64decode(fields["x"]))
