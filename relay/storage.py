"""What the relay keeps durably, and the interface every storage backend implements.

The core never touches storage: it returns :data:`Write` records among its effects, and the shell
commits a whole batch of them in one transaction (group commit) before it sends any frame that
was produced alongside them. So a ``posted`` reply, an ``op`` push or a roster change is never seen
by anyone before it is durable. At start the shell calls :meth:`RelayStorage.load` and hands the
:class:`Snapshot` to the core.

Backends: :class:`MemoryStorage` (tests, and the model of what a backend must do) and
``relay.sqlite_store.SqliteStorage`` (the default). A NATS JetStream backend comes later; it only
has to implement :class:`RelayStorage`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, Union

import attrs

from crosstalk.wire.relay import Member


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


Write = Union[  # noqa: UP007 - a plain alias reads better in isinstance-free code
    RoomPut, RoomDeleted, MemberPut, MemberDeleted, OpAppended, OpsPruned, DevicePut, CursorPut
]


@attrs.frozen
class RoomRecord:
    room: str
    head: int
    members: list[Member]
    ops: list[StoredOp]


@attrs.frozen
class Snapshot:
    """Everything durable, as loaded at start."""

    rooms: list[RoomRecord] = attrs.Factory(list)
    devices: list[DevicePut] = attrs.Factory(list)
    cursors: list[CursorPut] = attrs.Factory(list)


class RelayStorage(Protocol):
    """A durable home for rooms, logs, devices and cursors.

    ``commit`` is synchronous and atomic: when it returns, every write in the batch survives a
    crash (or none does, if it raised). The shell calls it from its event loop, one batch at a
    time, so it must be quick (a backend with slow round trips would need its own design).
    """

    def load(self) -> Snapshot: ...

    def commit(self, writes: Sequence[Write]) -> None: ...

    def close(self) -> None: ...


@attrs.define
class _MemRoom:
    head: int = 0
    members: dict[str, Member] = attrs.Factory(dict)
    ops: dict[int, StoredOp] = attrs.Factory(dict)


class MemoryStorage:
    """A storage backend in a dict: the reference semantics, used by the core tests."""

    def __init__(self) -> None:
        self._rooms: dict[str, _MemRoom] = {}
        self._devices: set[tuple[str, str]] = set()
        self._cursors: dict[tuple[str, str, str], int] = {}
        self.commits = 0

    def load(self) -> Snapshot:
        rooms = [
            RoomRecord(name, r.head, list(r.members.values()), [r.ops[s] for s in sorted(r.ops)])
            for name, r in self._rooms.items()
        ]
        devices = [DevicePut(fp, dev) for fp, dev in sorted(self._devices)]
        cursors = [CursorPut(fp, dev, room, seq) for (fp, dev, room), seq in self._cursors.items()]
        return Snapshot(rooms, devices, cursors)

    def commit(self, writes: Sequence[Write]) -> None:
        self.commits += 1
        for write in writes:
            self._apply(write)

    def close(self) -> None:
        pass

    def _apply(self, w: Write) -> None:
        if isinstance(w, RoomPut):
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
