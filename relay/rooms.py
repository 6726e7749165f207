"""Rooms, rosters, room logs and device cursors (sans-IO; part of the relay core).

Theory of operation
-------------------
A room is an id, a roster and a log. Rosters have no owner: each entry is ``invited`` or
``joined`` and carries the member's keys signed by whoever added it. Only a joined member may add,
remove, post or acknowledge; an invited member may only look at the roster, accept or decline.
When no joined member remains the room is deleted with its log. A joined member who leaves or is
removed stays in the roster as ``left`` (the last :data:`MAX_DEPARTED` of them, in ``departed``,
never in ``members``): their entry, signed by whoever added them, is how a member who was away
through their whole stay verifies the ops they signed (sim seed 311: such ops were held for ever).
With a joined member's departure the room also keeps the ids of the ops it posted and had not
acknowledged (``departed_ops``, at most :data:`MAX_DEPARTED_OPS`): the departure may prune them
(everyone left has them), and a retry of one whose ``posted`` was lost must still be answered
with its seq, not refused (sim seed 5249: the sender reported refused an op the others read).

The log is one total order per room: ``head`` is the last seq given out and never goes back (it
is stored even when every op has been pruned, so cursors stay meaningful). An op is held until
every known device of every joined member has acknowledged it (its cursor passed it) or until it
is older than the retention; both drop a prefix of the log, never a hole. A room counts the
devices still before its first held op (``holding``): an ack prunes only when it ends that
count, so an op costs the room O(members), not O(members) per acknowledgement.

Devices are learned at authentication. A device's cursor in a room starts at the head when the
device or the membership first appears: nobody is owed ops from before they joined. Cursors only
move forward and never past the head.

Every method that changes state returns the storage writes that make the change durable, in the
order they must be applied; rule violations raise ``RemoteProtocolError`` with ``hint`` set to the
error code for the client. Nothing here sends frames: the core decides who hears about what.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

import attrs

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.chain import Statement
from crosstalk.wire.relay import Member
from relay.room_state import RoomState
from relay.storage import (
    CursorPut,
    DepartedOps,
    DevicePut,
    MemberDeleted,
    MemberPut,
    OpsPruned,
    RoomDeleted,
    RoomPut,
    Snapshot,
    StatementAppended,
    StoredOp,
    Write,
)

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_DEPARTED = 64  # departed members' entries a room keeps, the oldest dropped first
MAX_DEPARTED_OPS = 64  # a departed member's unacknowledged op ids kept, the newest


def refuse(code: str, message: str) -> RemoteProtocolError:
    """A rule violation to report to the client as ``error {code, message}``."""
    return RemoteProtocolError(message, hint=code)


def check_id(value: str, what: str) -> None:
    if not ID_PATTERN.fullmatch(value):
        raise refuse("bad_frame", f"{what} must be 1-64 letters, digits, '-' or '_'")


class RoomBook:
    """Every room on this relay, who is in which, and every device's cursor."""

    def __init__(self) -> None:
        self.rooms: dict[str, RoomState] = {}
        self.devices: dict[str, set[str]] = {}
        self.cursors: dict[tuple[str, str, str], int] = {}  # (fingerprint, device, room) -> seq
        self.member_of: dict[str, set[str]] = {}  # fingerprint -> rooms (invited or joined)
        # The highest seq of a room that may be pruned for acknowledgement (None: any). A relay
        # node sets it: it must not prune an op before it has seen every device registered
        # before that op (relay.node).
        self.prune_limit: Callable[[str], int] | None = None

    def load(self, snapshot: Snapshot) -> None:
        for record in snapshot.rooms:
            state = RoomState(record.room, head=record.head)
            for member in record.members:
                if member.state == "left":
                    state.departed[member.fingerprint] = member
                    continue
                state.members[member.fingerprint] = member
                self.member_of.setdefault(member.fingerprint, set()).add(record.room)
            state.departed_ops = {fp: dict(ops) for fp, ops in record.departed_ops.items()}
            for stmt in record.chain:  # checked when they came; a history stored is a history
                state.history.append(stmt, verify=False)
                state.statements.append(stmt)
            for op in record.ops:
                state.log.append(op)
                state.op_ids[op.op_id] = op.seq
                state.log_bytes += len(op.body)
            self.rooms[record.room] = state
        for device in snapshot.devices:
            self.devices.setdefault(device.fingerprint, set()).add(device.device)
        for c in snapshot.cursors:
            self.cursors[(c.fingerprint, c.device, c.room)] = c.seq

    # --- lookups -------------------------------------------------------------------------------

    def get(self, room: str) -> RoomState:
        state = self.rooms.get(room)
        if state is None:
            raise refuse("unknown_room", f"there is no room {room!r}")
        return state

    def own_seq(self, room: str, fp: str, op_id: str) -> tuple[int, float] | None:
        """The seq and time of ``fp``'s op ``op_id`` in ``room`` while the relay still holds it,
        or its seq (time 0: not kept) if it remembers it as one ``fp`` had not acknowledged when
        it departed (a departed member no longer applies the room's memory)."""
        state = self.rooms.get(room)
        if state is None:
            return None
        seq = state.op_ids.get(op_id)
        if seq is not None:
            held = state.log[seq - state.first()]
            if held.sender == fp:
                return seq, held.ts
        departed = state.departed_ops.get(fp, {}).get(op_id)
        return None if departed is None else (departed, 0.0)

    def require_joined(self, room: str, fp: str) -> RoomState:
        state = self.get(room)
        member = state.members.get(fp)
        if member is None or member.state != "joined":
            raise refuse("not_a_member", f"you are not a joined member of room {room!r}")
        return state

    def peers(self, fp: str) -> set[str]:
        """Everyone who shares a room with ``fp`` where both are joined."""
        out: set[str] = set()
        for room in self.member_of.get(fp, ()):
            state = self.rooms[room]
            if state.members[fp].state == "joined":
                out.update(state.joined())
        out.discard(fp)
        return out

    def devices_of(self, fps: Iterable[str]) -> Iterator[tuple[str, str]]:
        for fp in fps:
            for device in self.devices.get(fp, ()):
                yield fp, device

    # --- devices and cursors -------------------------------------------------------------------

    def device_seen(self, fp: str, device: str) -> list[Write]:
        """Register a device at authentication; a new one starts at every room's head."""
        known = self.devices.setdefault(fp, set())
        if device in known:
            return []
        known.add(device)
        writes: list[Write] = [DevicePut(fp, device)]
        for room in sorted(self.member_of.get(fp, ())):
            writes.extend(self._start_cursor(fp, device, self.rooms[room]))
        return writes

    def device_stored(self, fp: str, device: str) -> list[Write]:
        """:meth:`device_seen`'s writes, made again even for a device known in memory (whose
        write may never have been stored), without moving any cursor it already has."""
        self.devices.setdefault(fp, set()).add(device)
        writes: list[Write] = [DevicePut(fp, device)]
        for room in sorted(self.member_of.get(fp, ())):
            if (fp, device, room) not in self.cursors:
                writes.extend(self._start_cursor(fp, device, self.rooms[room]))
        return writes

    def _start_cursor(self, fp: str, device: str, state: RoomState) -> list[Write]:
        self.cursors[(fp, device, state.room)] = state.head
        state.holding = None  # one more device to count
        return [CursorPut(fp, device, state.room, state.head)]

    def acknowledge(self, fp: str, device: str, room: str, seq: int) -> list[Write]:
        """Move a device's cursor forward (never past the head), then prune what all have."""
        state = self.require_joined(room, fp)
        if seq < 0:
            raise refuse("bad_frame", "seq must not be negative")
        key = (fp, device, room)
        target = min(seq, state.head)
        old = self.cursors.get(key)
        if target <= (0 if old is None else old):
            return []
        self.cursors[key] = target
        written = CursorPut(fp, device, room, target)
        if old is not None and self._still_held(state, old, target):
            return [written]
        return [written, *self._prune_acknowledged(state)]

    def _still_held(self, state: RoomState, old: int, new: int) -> bool:
        """Whether another device still holds the first held op, after one moved from ``old``
        to ``new``: then nothing can be pruned, and the O(devices) floor is not computed.

        Every member acknowledges every op, so computing the floor at each ack cost O(n^2) per
        op in a room of n (issue 41); counted down, it is computed once per op. Not on a relay
        node, whose prune limit may rise without any acknowledgement.
        """
        if self.prune_limit is not None or state.holding is None:
            return False
        if old < state.first() <= new:
            state.holding -= 1
        return state.holding > 0

    def _prune_acknowledged(self, state: RoomState) -> list[Write]:
        cursors = [self.cursors.get((fp, dev, state.room))
                   for fp, dev in self.devices_of(state.joined())]
        floor = min((state.head if c is None else c for c in cursors), default=state.head)
        if self.prune_limit is not None:
            floor = min(floor, self.prune_limit(state.room))
        writes = self._drop_through(state, floor)
        first = state.first()
        # A device with no cursor yet counts as at the head (above); it is not counted here, as
        # its first ack computes the floor again (and the head moves under it with each op).
        state.holding = sum(1 for c in cursors if c is not None and c < first)
        return writes

    def _drop_through(self, state: RoomState, through: int) -> list[Write]:
        if not state.log or state.log[0].seq > through:
            return []
        state.holding = None  # the first held op changes: who holds it is counted again
        while state.log and state.log[0].seq <= through:
            op = state.log.popleft()
            state.op_ids.pop(op.op_id, None)
            state.log_bytes -= len(op.body)
        return [OpsPruned(state.room, through)]

    def expire(self, cutoff: float) -> list[Write]:
        """Drop every held op stamped at or before ``cutoff`` (now minus the retention)."""
        writes: list[Write] = []
        for state in self.rooms.values():
            last = None
            for op in state.log:
                if op.ts > cutoff:
                    break
                last = op.seq
            if last is not None:
                writes.extend(self._drop_through(state, last))
        return writes

    # --- membership ----------------------------------------------------------------------------

    def create(self, room: str, member: Member) -> tuple[RoomState, list[Write]]:
        check_id(room, "room")
        if room in self.rooms:
            raise refuse("room_exists", f"room {room!r} already exists; pick another random id")
        state = self.rooms[room] = RoomState(room)
        writes: list[Write] = [RoomPut(room)]
        writes.extend(self._put_member(state, member))
        return state, writes

    def add(self, state: RoomState, member: Member) -> list[Write]:
        if member.fingerprint in state.members:
            raise refuse("already_member", "that person is already in the room's roster")
        return self._put_member(state, member)

    def accept(self, room: str, fp: str) -> tuple[RoomState, list[Write]]:
        state = self.invitation(room, fp)
        member = attrs.evolve(state.members[fp], state="joined")
        return state, self._put_member(state, member)

    def invitation(self, room: str, fp: str) -> RoomState:
        """The room ``fp`` is invited to; ``not_invited`` if there is no such invitation."""
        state = self.rooms.get(room)
        member = state.members.get(fp) if state else None
        if state is None or member is None or member.state != "invited":
            raise refuse("not_invited", f"you have no invitation to room {room!r}")
        return state

    def decline(self, room: str, fp: str) -> tuple[RoomState, list[Write]]:
        state = self.invitation(room, fp)
        return state, self.drop_member(state, fp)

    def _put_member(self, state: RoomState, member: Member) -> list[Write]:
        if member.state == "left":  # a node replaying another's departure (relay.replica)
            return self._depart(state, member)
        state.departed.pop(member.fingerprint, None)  # added again
        state.members[member.fingerprint] = member
        self.member_of.setdefault(member.fingerprint, set()).add(state.room)
        writes: list[Write] = [MemberPut(state.room, member)]
        if member.state == "joined":
            for fp, device in self.devices_of([member.fingerprint]):
                writes.extend(self._start_cursor(fp, device, state))
        return writes

    def drop_member(self, state: RoomState, fp: str) -> list[Write]:
        """Take ``fp`` out; delete the room when no joined member is left. A joined member is
        kept as departed (its row written again as ``left``, after the delete that ends its
        cursors)."""
        member = state.members.pop(fp)
        owed = self._unacknowledged(state, fp) if member.state == "joined" else None
        self._forget(fp, state.room)
        if not state.joined():
            return self._delete(state)
        writes: list[Write] = [MemberDeleted(state.room, fp)]
        if member.state == "joined":
            writes += self._depart(state, attrs.evolve(member, state="left"))
        if owed:  # with those of an earlier stay, so never fewer than were kept
            writes += self.keep_departed_ops(state, fp, owed)
        return writes + self._prune_acknowledged(state)

    def _unacknowledged(self, state: RoomState, fp: str) -> tuple[tuple[str, int], ...]:
        """``fp``'s held ops past the cursor of its least advanced device, the newest
        :data:`MAX_DEPARTED_OPS`, with those it already had from an earlier stay."""
        cursor = min((self.cursors.get((fp, dev, state.room), 0)
                      for _, dev in self.devices_of([fp])), default=0)
        owed = dict(state.departed_ops.get(fp, {}))
        owed.update((op.op_id, op.seq) for op in state.after(cursor) if op.sender == fp)
        return tuple(sorted(owed.items(), key=lambda item: item[1])[-MAX_DEPARTED_OPS:])

    def keep_departed_ops(self, state: RoomState, fp: str,
                          ops: tuple[tuple[str, int], ...]) -> list[Write]:
        """Keep ``ops`` (op id, seq) as ``fp``'s unacknowledged ones in place of any before."""
        state.departed_ops.pop(fp, None)
        if ops:
            state.departed_ops[fp] = dict(ops)
        return [DepartedOps(state.room, fp, ops)]

    def _depart(self, state: RoomState, member: Member) -> list[Write]:
        state.departed.pop(member.fingerprint, None)
        state.departed[member.fingerprint] = member
        writes: list[Write] = [MemberPut(state.room, member)]
        while len(state.departed) > MAX_DEPARTED:
            oldest = next(iter(state.departed))
            del state.departed[oldest]
            writes.append(MemberDeleted(state.room, oldest))
            if oldest in state.departed_ops:
                writes += self.keep_departed_ops(state, oldest, ())
        return writes

    def _forget(self, fp: str, room: str) -> None:
        rooms = self.member_of.get(fp, set())
        rooms.discard(room)
        if not rooms:
            self.member_of.pop(fp, None)
        for device in self.devices.get(fp, ()):
            self.cursors.pop((fp, device, room), None)
        state = self.rooms.get(room)
        if state is not None:
            state.holding = None  # fewer devices to count

    def _delete(self, state: RoomState) -> list[Write]:
        for fp in list(state.members):
            self._forget(fp, state.room)
        del self.rooms[state.room]  # the caller may still read the detached roster
        return [RoomDeleted(state.room)]

    def record_statement(self, state: RoomState, stmt: Statement) -> list[Write]:
        """Append ``stmt`` (already checked against the history) to the room's history."""
        index = state.history.length
        state.history.append(stmt, verify=False)
        state.statements.append(stmt)
        return [StatementAppended(state.room, index, stmt)]

    # --- the log -------------------------------------------------------------------------------

    def append(
        self, state: RoomState, sender: str, op_id: str, body: bytes, now: float
    ) -> StoredOp:
        """Give the op the next seq and hold it. The caller has checked the limits."""
        state.head += 1
        op = StoredOp(seq=state.head, sender=sender, op_id=op_id, body=body, ts=now)
        state.log.append(op)
        state.op_ids[op_id] = op.seq
        state.log_bytes += len(body)
        return op

    # --- for a stateless node (relay.replica): the same steps, for writes stored elsewhere ---

    def put_member(self, state: RoomState, member: Member) -> None:
        self._put_member(state, member)

    def prune_acknowledged(self, state: RoomState) -> None:
        self._prune_acknowledged(state)

    def drop_through(self, state: RoomState, through: int) -> None:
        self._drop_through(state, through)

    def delete(self, state: RoomState) -> None:
        self._delete(state)

    def held_ops(self) -> int:
        return sum(len(s.log) for s in self.rooms.values())

    def held_bytes(self) -> int:
        return sum(s.log_bytes for s in self.rooms.values())



__all__ = ["RoomBook", "RoomState", "check_id", "refuse"]
