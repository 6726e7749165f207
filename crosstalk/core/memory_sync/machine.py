"""Memory sync's rules for every room, sans-IO: :class:`MemorySyncState` owns a
:class:`~crosstalk.core.memory_sync.room.RoomSync` per room (where the rules are, with their
theory and transition table) and the time they share.

Theory of operation
-------------------
The memory-sync actor, on each input and at each deadline:

1. tells this owner what the store shows (:meth:`~MemorySyncState.observe`: rooms we are in,
   those with a hole, those whose memory gave ops up and journals), which becomes the rooms'
   inputs ``joined``, ``left``, ``hole_seen``, ``hole_filled``, ``conceded_seen``, ``repaired``;
2. feeds one room the input that happened (``room(r).snapshot_asked``, ``snapshot_seen``,
   ``ask_heard``, ``log_resumed``), or :meth:`~MemorySyncState.started` after the start probe;
3. calls :meth:`~MemorySyncState.tick` with the time, and presence and rosters for
   :meth:`~MemorySyncState.rooms_due`: asks that are due retry, and every
   :data:`PROBE_EVERY` a look probes rooms joined since start and asks for repairs;
4. carries out :meth:`~MemorySyncState.commands_to_send` and logs
   :meth:`~MemorySyncState.events`.

Nothing here reads a clock or draws a random number: request ids are the shell's, and an ask
names its hole by a counter (``generation``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from crosstalk.core.memory_sync.outputs import (
    PROBE_EVERY,
    Command,
    Event,
    Outbox,
    SyncState,
)
from crosstalk.core.memory_sync.room import HOLE, RoomSync

S = SyncState


class MemorySyncState:
    """Every room's memory-sync machine; ``me`` is our fingerprint."""

    room_machine: type[RoomSync] = RoomSync  # a test plants a broken rule by subclassing

    def __init__(self, me: str) -> None:
        self.me = me
        self._rooms: dict[str, RoomSync] = {}
        self._next_look: float | None = None  # None until the start probe has run
        self._out = Outbox()

    def room(self, room: str) -> RoomSync:
        """``room``'s machine (OUT until it is joined), to feed an input to."""
        found = self._rooms.get(room)
        if found is None:
            found = self._rooms[room] = self.room_machine(room, self.me, self._out)
        return found

    def state(self, room: str) -> SyncState:
        """Where ``room`` stands (OUT for a room never seen)."""
        found = self._rooms.get(room)
        return found.state if found is not None else S.OUT

    # --- outputs and deadlines -------------------------------------------------------------------

    def commands_to_send(self) -> list[Command]:
        """What the shell must do, in order (drained)."""
        out, self._out.commands = self._out.commands, []
        return out

    def events(self) -> list[Event]:
        """What happened that only wants telling, in order (drained)."""
        out, self._out.events = self._out.events, []
        return out

    def next_deadline(self) -> float:
        """When :meth:`tick` next has something to do (``inf``: only an input can wake it)."""
        times = [r.deadline or float("-inf") for r in self._rooms.values() if r.state in HOLE]
        if self._next_look is not None:
            times.append(self._next_look)
        return min(times, default=float("inf"))

    def rooms_due(self, now: float) -> list[str]:
        """The rooms :meth:`tick` at ``now`` needs rosters (and presence) for."""
        look = self._look_due(now)
        return sorted(
            room for room, r in self._rooms.items()
            if r.due(now) or (look and r.state is S.CONCEDED)
        )

    def _look_due(self, now: float) -> bool:
        return self._next_look is not None and now >= self._next_look

    # --- inputs ----------------------------------------------------------------------------------

    def observe(
        self, joined: Iterable[str], stalled: Collection[str], repairing: Mapping[str, int]
    ) -> None:
        """What the store shows now: the rooms we are in, those with a hole, and those whose
        memory gave ops up and journals (with the ops journaled)."""
        joined = set(joined)
        for name in sorted(set(self._rooms) - joined):
            if self._rooms[name].state is not S.OUT:
                self._rooms[name].left()
        for name in sorted(joined):
            room = self.room(name)
            if room.state is S.ERROR:
                continue
            if room.state is S.OUT:
                room.joined()
            if name in stalled:
                if room.state in (S.IN_SYNC, S.CONCEDED):
                    room.hole_seen()
            elif name in repairing:
                room.conceded_seen(repairing[name])
            elif room.state in HOLE:
                room.hole_filled()
            elif room.state is S.CONCEDED:
                room.repaired()

    def started(self, rooms: Iterable[str], now: float) -> None:
        """The start probe went out for ``rooms``; looks begin :data:`PROBE_EVERY` from now."""
        for name in rooms:
            self.room(name).probed()
        self._next_look = now + PROBE_EVERY

    def tick(
        self, now: float, online: Collection[str], rosters: Mapping[str, Collection[str]],
        inviters: Mapping[str, str | None] | None = None,
    ) -> None:
        """Time passed: retry asks that are due, and look around if a look is due. ``online``
        are the members the relay sees; ``rosters`` the joined members of :meth:`rooms_due`,
        ``inviters`` who added us to each of them (where known)."""
        for name, room in sorted(self._rooms.items()):
            if room.due(now):
                room.retry_due(now, online, rosters.get(name, ()), (inviters or {}).get(name))
        if not self._look_due(now):
            return
        self._next_look = now + PROBE_EVERY
        for name, room in sorted(self._rooms.items()):
            if room.state not in (S.OUT, S.ERROR):
                room.look_due(online, rosters.get(name, ()))
