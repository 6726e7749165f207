"""What the relay keeps durably, and the interface every storage backend implements.

The core never touches storage: it returns :data:`Write` records among its effects, and the shell
commits a whole batch of them in one transaction (group commit) before it sends any frame that
was produced alongside them. So a ``posted`` reply, an ``op`` push or a roster change is never seen
by anyone before it is durable. At start the shell calls :meth:`RelayStorage.load` and hands the
:class:`Snapshot` to the core.

Backends: :class:`MemoryStorage` (tests, and the model of what a backend must do),
``relay.sqlite_store.SqliteStorage`` (the default) and ``relay.nats_store.NatsStorage``.

Pairing slots and pairing grants are durable too, so a relay restart or a cluster failover does
not end a pairing in progress: a slot's opening, its one join (the slot's whole guess budget:
DESIGN.md §5 gives each slot one join attempt), each write-once part and its removal are writes
like any other. Both carry a wall-clock expiry; a backend never loads an expired one (it asks its
``clock``, the same wall clock the shell gives the core as ``now``). Which connections are attached
to a slot is not stored: after a restart every client reconnects and attaches again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, Union, runtime_checkable

import attrs

from crosstalk.wire.chain import Statement
from crosstalk.wire.relay import Member, Side


@attrs.frozen
class StoredOp:
    """One sealed op in a room log. ``body`` is opaque ciphertext."""

    seq: int
    sender: str
    op_id: str
    body: bytes
    ts: float


@attrs.frozen
class RoomPut:
    """A room now exists (its ``head`` is the last seq given out)."""

    room: str


@attrs.frozen
class RoomDeleted:
    """The room, its roster, its log and every cursor in it are gone."""

    room: str


@attrs.frozen
class MemberPut:
    room: str
    member: Member


@attrs.frozen
class MemberDeleted:
    """The member left or was removed; its devices' cursors in the room go too."""

    room: str
    fingerprint: str


@attrs.frozen
class DepartedOps:
    """The ops a member had posted and not yet acknowledged when it left or was removed, as
    ``(op_id, seq)`` pairs: a retry of one is answered with its seq after the op itself is
    pruned. Replaces what was kept for that member before; empty forgets it."""

    room: str
    fingerprint: str
    ops: tuple[tuple[str, int], ...]


@attrs.frozen
class StatementAppended:
    """The room's membership history gains ``stmt`` at ``index`` (kept as long as the room)."""

    room: str
    index: int
    stmt: Statement


@attrs.frozen
class OpAppended:
    """Appends ``op`` and sets the room's head to ``op.seq``."""

    room: str
    op: StoredOp


@attrs.frozen
class OpsPruned:
    """Drops every op of ``room`` with seq <= ``through`` (the head is kept)."""

    room: str
    through: int


@attrs.frozen
class DevicePut:
    fingerprint: str
    device: str


@attrs.frozen
class CursorPut:
    fingerprint: str
    device: str
    room: str
    seq: int


@attrs.frozen
class Peer:
    """An authenticated identity as pairing slots know it."""

    fingerprint: str
    ed_pub: bytes
    x_pub: bytes


@attrs.frozen
class SlotOpened:
    """Pairing slot ``number`` exists for ``owner`` until ``expires_at``.

    It replaces anything still stored under the number (an expired slot never removed, because
    the relay was down when it expired): the number was free in the core.
    """

    number: str
    owner: Peer
    expires_at: float


@attrs.frozen
class SlotFilled:
    """The slot's one join attempt is spent, by ``joiner``; a restart must not give it back."""

    number: str
    joiner: Peer


@attrs.frozen
class SlotPartPut:
    """A write-once part of the slot, from ``side``."""

    number: str
    side: Side
    index: int
    data: bytes


@attrs.frozen
class SlotRemoved:
    """The slot is gone: closed (burned by wrong words, or given up) or expired."""

    number: str


@attrs.frozen
class GrantPut:
    """``a`` and ``b`` (sorted) just paired: one ``add`` between them is allowed until expiry."""

    a: str
    b: str
    expires_at: float


@attrs.frozen
class GrantDeleted:
    """The grant between ``a`` and ``b`` (sorted) was used or expired."""

    a: str
    b: str


Write = Union[  # noqa: UP007 - a plain alias reads better in isinstance-free code
    RoomPut, RoomDeleted, MemberPut, MemberDeleted, DepartedOps, StatementAppended, OpAppended,
    OpsPruned, DevicePut, CursorPut, SlotOpened, SlotFilled, SlotPartPut, SlotRemoved, GrantPut,
    GrantDeleted,
]
SLOT_WRITES = (SlotOpened, SlotFilled, SlotPartPut, SlotRemoved, GrantPut, GrantDeleted)


@attrs.frozen
class RoomRecord:
    room: str
    head: int
    members: list[Member]
    ops: list[StoredOp]
    departed_ops: dict[str, dict[str, int]] = attrs.Factory(dict)  # fingerprint -> op id -> seq
    chain: list[Statement] = attrs.Factory(list)  # the membership history, in order


@attrs.frozen
class SlotRecord:
    """A live pairing slot; ``parts`` are sorted by (side, index)."""

    number: str
    owner: Peer
    expires_at: float
    joiner: Peer | None = None
    parts: list[SlotPartPut] = attrs.Factory(list)


@attrs.frozen
class Snapshot:
    """Everything durable, as loaded at start (slots and grants: only unexpired ones)."""

    rooms: list[RoomRecord] = attrs.Factory(list)
    devices: list[DevicePut] = attrs.Factory(list)
    cursors: list[CursorPut] = attrs.Factory(list)
    slots: list[SlotRecord] = attrs.Factory(list)
    grants: list[GrantPut] = attrs.Factory(list)


def grant_key(x: str, y: str) -> tuple[str, str]:
    """The stored order of a grant's two fingerprints."""
    return (x, y) if x <= y else (y, x)


class RelayStorage(Protocol):
    """A durable home for rooms, logs, devices and cursors.

    ``commit`` is synchronous and atomic: when it returns, every write in the batch survives a
    crash (or none does, if it raised). The shell calls it from its event loop, one batch at a
    time, so it must be quick (a backend with slow round trips would need its own design).
    """

    def load(self) -> Snapshot: ...

    def commit(self, writes: Sequence[Write]) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class StagedStorage(Protocol):
    """A storage whose commit comes in two halves, so the shell can wait for the slow one (the
    fsync) off its event loop while the loop goes on with the frames already committed.

    ``stage`` applies the batch in a new transaction and returns ``finish``, which makes it
    durable (or rolls it back and raises). Between the two nothing else touches the storage, and
    ``finish`` may run on another thread. ``commit(writes)`` is ``stage(writes)()``.

    With ``sync=False`` (only for a batch :func:`needs_sync` lets go) ``finish`` commits without
    waiting for the disk: the batch survives the process dying at once, but an OS crash or a
    power cut may take it back, together with every later unsynced batch and never anything
    else; the next synced commit makes it durable along with its own writes.
    """

    def stage(self, writes: Sequence[Write], *, sync: bool = True) -> Callable[[], None]: ...


def needs_sync(writes: Sequence[Write]) -> bool:
    """False for a batch of acknowledgements alone (cursor moves and the prunes they allow), which
    need not wait for the disk.

    Nothing is sent because of them: an ``ack`` has no answer, and what a later frame tells a
    client (a replay, ``resumed``) is as true if they are lost. Lost in an OS crash, they only
    roll back to the cursors and ops of a moment earlier, as if the acks had come a little later:
    the relay holds those ops a while longer (the next ack prunes them), and a client that
    resumes names its own cursor, which is at least as far (the relay replays from the greater
    of the two), so at worst an op is delivered twice and the daemon drops it by seq and op id.
    A cursor that must be durable (a device's or member's first, at the head, so nobody is owed
    ops from before they joined) always comes with its DevicePut or MemberPut in one batch.
    """
    return not all(type(w) in _ACKS for w in writes)


_ACKS = frozenset({CursorPut, OpsPruned})


@attrs.define
class _MemRoom:
    head: int = 0
    members: dict[str, Member] = attrs.Factory(dict)
    ops: dict[int, StoredOp] = attrs.Factory(dict)
    departed_ops: dict[str, dict[str, int]] = attrs.Factory(dict)
    chain: dict[int, Statement] = attrs.Factory(dict)


class MemoryStorage:
    """A storage backend in a dict: the reference semantics, used by the core tests.

    Args:
        clock: wall-clock seconds; slots and grants expired by it are not loaded. This module
            reads no clock of its own (it is pure), so the default is the fixed time 0.0, where
            the core tests' virtual time starts.
    """

    def __init__(self, clock: Callable[[], float] = lambda: 0.0) -> None:
        self._clock = clock
        self._rooms: dict[str, _MemRoom] = {}
        self._devices: set[tuple[str, str]] = set()
        self._cursors: dict[tuple[str, str, str], int] = {}
        self._slots: dict[str, SlotRecord] = {}
        self._grants: dict[tuple[str, str], float] = {}
        self.commits = 0

    def load(self) -> Snapshot:
        rooms = [
            RoomRecord(name, r.head, list(r.members.values()), [r.ops[s] for s in sorted(r.ops)],
                       {fp: dict(ops) for fp, ops in r.departed_ops.items()},
                       [r.chain[i] for i in sorted(r.chain)])
            for name, r in self._rooms.items()
        ]
        devices = [DevicePut(fp, dev) for fp, dev in sorted(self._devices)]
        cursors = [CursorPut(fp, dev, room, seq) for (fp, dev, room), seq in self._cursors.items()]
        now = self._clock()
        slots = [s for _, s in sorted(self._slots.items()) if now < s.expires_at]
        grants = [GrantPut(a, b, t) for (a, b), t in sorted(self._grants.items()) if now < t]
        return Snapshot(rooms, devices, cursors, slots, grants)

    def commit(self, writes: Sequence[Write]) -> None:
        self.commits += 1
        for write in writes:
            self._apply(write)

    def close(self) -> None:
        pass

    def _apply(self, w: Write) -> None:
        if isinstance(w, SLOT_WRITES):
            self._apply_slot(w)
        elif isinstance(w, RoomPut):
            self._rooms.setdefault(w.room, _MemRoom())
        elif isinstance(w, RoomDeleted):
            self._rooms.pop(w.room, None)
            self._cursors = {k: v for k, v in self._cursors.items() if k[2] != w.room}
        elif isinstance(w, MemberPut):
            self._rooms[w.room].members[w.member.fingerprint] = w.member
        elif isinstance(w, MemberDeleted):
            self._rooms[w.room].members.pop(w.fingerprint, None)
            self._cursors = {
                k: v for k, v in self._cursors.items() if (k[0], k[2]) != (w.fingerprint, w.room)
            }
        elif isinstance(w, DepartedOps):
            departed = self._rooms[w.room].departed_ops
            departed.pop(w.fingerprint, None)
            if w.ops:
                departed[w.fingerprint] = dict(w.ops)
        elif isinstance(w, StatementAppended):
            self._rooms[w.room].chain[w.index] = w.stmt
        elif isinstance(w, OpAppended):
            room = self._rooms[w.room]
            room.ops[w.op.seq] = w.op
            room.head = w.op.seq
        elif isinstance(w, OpsPruned):
            room = self._rooms[w.room]
            room.ops = {s: op for s, op in room.ops.items() if s > w.through}
        elif isinstance(w, DevicePut):
            self._devices.add((w.fingerprint, w.device))
        else:
            self._cursors[(w.fingerprint, w.device, w.room)] = w.seq

    def _apply_slot(self, w: Write) -> None:
        if isinstance(w, SlotOpened):
            self._slots[w.number] = SlotRecord(w.number, w.owner, w.expires_at)
        elif isinstance(w, SlotFilled):
            self._slots[w.number] = attrs.evolve(self._slots[w.number], joiner=w.joiner)
        elif isinstance(w, SlotPartPut):
            slot = self._slots[w.number]
            parts = sorted([*slot.parts, w], key=lambda p: (p.side, p.index))
            self._slots[w.number] = attrs.evolve(slot, parts=parts)
        elif isinstance(w, SlotRemoved):
            self._slots.pop(w.number, None)
        elif isinstance(w, GrantPut):
            self._grants[(w.a, w.b)] = w.expires_at
        elif isinstance(w, GrantDeleted):
            self._grants.pop((w.a, w.b), None)
