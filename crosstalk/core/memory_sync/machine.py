"""Memory sync's rules, sans-IO: when a room's memory asks, concedes, answers and is repaired.

Theory of operation
-------------------
One :class:`MemorySyncState` per daemon holds one small machine per room (:class:`SyncState`).
The store keeps the memory itself (``store/memory_log.py`` follows the log, parks ops behind a
hole, installs snapshots, journals); this machine decides what to *do* about it. The memory-sync
actor tells it what the store shows (:meth:`~MemorySyncState.observe`, which becomes the inputs
``room_joined``, ``room_left``, ``hole_seen``, ``hole_filled``, ``conceded_seen`` and
``repaired``), what peers asked (``snapshot_asked``), what the relay sequenced (``ask_heard``)
and what time it is (``tick``), then carries out :meth:`~MemorySyncState.commands_to_send`.

* **OUT.** A room we are not in is never asked about nor repaired; leaving forgets everything
  about it, so the asks of a later rejoin count afresh (sim seeds 4483, 8678).
* **Probing.** A room joined after start is probed at the next look (every
  :data:`PROBE_EVERY`): a request naming nobody, whose sequencing shows a hole before it. A
  link-up whose log starts past what we hold probes at once (``log_resumed``).
* **ASKING.** A hole asks one online member (never ourselves) at once, then the next one each
  :data:`RETRY_AFTER`, round after round in the same order (sim seed 1683). With nobody online
  it posts nothing and looks again at the next retry.
* **EXHAUSTED.** Every online member has had an ask of ours, sequenced by the relay (an ask
  waiting queued or refused was heard by nobody), for :data:`RETRY_AFTER`, and none filled the
  hole. Only now may we give the hole up, and only to answer a member whose hole ends later than
  ours (``held_from``, ties broken by fingerprint): the member that missed least concedes once,
  and the others install its snapshot, so replicas converge (sim seed 118). A member seen
  sending a snapshot (``snapshot_seen``) has no hole: it is asked next, and exhaustion waits
  until it too has had our ask in vain, rather than giving up a second, different hole.
* **Alone.** With no other joined member at all, the hole is given up at the second retry.
* **CONCEDED.** The memory gave ops up and journals what follows. At each look it asks each
  online member once (per stay in CONCEDED) for a ``repair``: only a memory that gave nothing
  up answers one. A journal past :data:`JOURNAL_MAX` is dropped, and asking stops.
* **Answering.** A member asked for our memory answers unless it has a hole (and may not
  concede), or the ask is a repair and our memory gave ops up itself.

Invariants: a room asks only while the store shows a hole; at most one member concedes each hole
when all of them follow these rules (the pair harness in ``tests/core`` checks it over every
interleaving of a small schedule); an input the table does not allow raises and parks the room
in ERROR, which only ``room_left`` leaves.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

import attrs

from crosstalk.core.memory_sync.outputs import (
    JOURNAL_MAX,
    PROBE_EVERY,
    RETRY_AFTER,
    AskForRepair,
    AskForSnapshot,
    Command,
    DropJournal,
    Event,
    GiveUpHole,
    Moved,
    NobodyToAsk,
    NotAnswered,
    OurMemory,
    PostProbe,
    SendSnapshot,
    SyncInput,
    SyncState,
)
from crosstalk.errors import LocalProtocolError, RemoteProtocolError

S, On = SyncState, SyncInput
_HOLE = frozenset({S.ASKING, S.EXHAUSTED})


@attrs.define
class _Room:
    """One room's machine: its state and what asking and repairing remember."""

    state: SyncState = SyncState.OUT
    probe_due: bool = False  # joined since the start probe: probe at the next look
    deadline: float | None = None  # the next ask (None: at once)
    rounds: int = 0  # asks tried for this hole (the first one never concedes)
    generation: int = 0  # which hole this is; an ask heard for an older one does not count
    tried: set[str] = attrs.Factory(set)  # asked in this round
    prefer: str | None = None  # seen sending a whole snapshot: asked next, whatever the round
    heard: dict[str, float] = attrs.Factory(dict)  # when the relay first sequenced our ask to each
    repair_asked: set[str] = attrs.Factory(set)
    journaled: int = 0


class MemorySyncState:
    """Every room's memory-sync machine; ``me`` is our fingerprint."""

    def __init__(self, me: str) -> None:
        self.me = me
        self._rooms: dict[str, _Room] = {}
        self._next_look: float | None = None  # None until the start probe has run
        self._holes = 0
        self._commands: list[Command] = []
        self._events: list[Event] = []

    # --- queries and outputs ---------------------------------------------------------------------

    def state(self, room: str) -> SyncState:
        """Where ``room`` stands (OUT for a room never seen)."""
        found = self._rooms.get(room)
        return found.state if found is not None else S.OUT

    def next_deadline(self) -> float:
        """When :meth:`tick` next has something to do (``inf``: only an input can wake it)."""
        times = [r.deadline or float("-inf") for r in self._rooms.values() if r.state in _HOLE]
        if self._next_look is not None:
            times.append(self._next_look)
        return min(times, default=float("inf"))

    def rooms_due(self, now: float) -> list[str]:
        """The rooms :meth:`tick` at ``now`` needs rosters (and presence) for."""
        look = self._next_look is not None and now >= self._next_look
        return sorted(
            room for room, r in self._rooms.items()
            if (r.state in _HOLE and (r.deadline or float("-inf")) <= now)
            or (look and r.state is S.CONCEDED)
        )

    def commands_to_send(self) -> list[Command]:
        """What the shell must do, in order (drained)."""
        out, self._commands = self._commands, []
        return out

    def events(self) -> list[Event]:
        """What happened that only wants telling, in order (drained)."""
        out, self._events = self._events, []
        return out

    # --- inputs from the store -------------------------------------------------------------------

    def observe(
        self, joined: Iterable[str], stalled: Collection[str], repairing: Mapping[str, int]
    ) -> None:
        """What the store shows now: the rooms we are in, those with a hole, and those whose
        memory gave ops up and journals (with the ops journaled). Becomes the inputs below."""
        joined = set(joined)
        for room in sorted(set(self._rooms) - joined):
            if self._rooms[room].state is not S.OUT:
                self.room_left(room)
        for room in sorted(joined):
            state = self.state(room)
            if state is S.ERROR:
                continue
            if state is S.OUT:
                self.room_joined(room)
                state = S.IN_SYNC
            if room in stalled:
                if state in (S.IN_SYNC, S.CONCEDED):
                    self.hole_seen(room)
            elif room in repairing:
                self.conceded_seen(room, repairing[room])
            elif state in _HOLE:
                self.hole_filled(room)
            elif state is S.CONCEDED:
                self.repaired(room)

    def started(self, rooms: Iterable[str], now: float) -> None:
        """The start probe went out for ``rooms``; looks begin :data:`PROBE_EVERY` from now."""
        for room in rooms:
            self.room_probed(room)
        self._next_look = now + PROBE_EVERY

    def room_joined(self, room: str) -> None:
        """We are in ``room`` now (it will be probed at the next look)."""
        rec = self._legal(room, On.JOINED)
        rec.probe_due = True
        self._move(room, rec, On.JOINED, S.IN_SYNC)

    def room_probed(self, room: str) -> None:
        """``room`` was probed at start: no probe at the next look."""
        rec = self._legal(room, On.PROBED)
        rec.probe_due = False
        self._move(room, rec, On.PROBED, S.IN_SYNC if rec.state is S.OUT else rec.state)

    def room_left(self, room: str) -> None:
        """We are no longer in ``room``: forget its asks and repairs."""
        rec = self._legal(room, On.LEFT)
        self._move(room, rec, On.LEFT, S.OUT)
        self._rooms[room] = _Room()

    def hole_seen(self, room: str) -> None:
        """The store marked a hole (a conceded memory's journal ends there): ask at once."""
        rec = self._legal(room, On.HOLE_SEEN)
        self._holes += 1
        rec.generation, rec.deadline, rec.rounds, rec.prefer = self._holes, None, 0, None
        rec.tried, rec.heard, rec.repair_asked = set(), {}, set()
        self._move(room, rec, On.HOLE_SEEN, S.ASKING)

    def hole_filled(self, room: str) -> None:
        """A complete snapshot filled the hole."""
        rec = self._legal(room, On.HOLE_FILLED)
        self._move(room, rec, On.HOLE_FILLED, S.IN_SYNC)

    def conceded_seen(self, room: str, journaled: int) -> None:
        """The memory gave ops up (ours, or a conceded snapshot we installed) and journals
        ``journaled`` ops."""
        rec = self._legal(room, On.CONCEDED_SEEN)
        if rec.state is not S.CONCEDED:
            rec.repair_asked = set()
        rec.journaled = journaled
        self._move(room, rec, On.CONCEDED_SEEN, S.CONCEDED)

    def repaired(self, room: str) -> None:
        """A complete member's snapshot was installed under the journal."""
        rec = self._legal(room, On.REPAIRED)
        self._move(room, rec, On.REPAIRED, S.IN_SYNC)

    # --- inputs from peers and the relay ---------------------------------------------------------

    def ask_heard(self, room: str, generation: int, member: str, now: float) -> None:
        """The relay sequenced our ask to ``member`` (from :class:`AskForSnapshot`)."""
        rec = self._legal(room, On.ASK_HEARD)
        if rec.state in _HOLE and generation == rec.generation:
            rec.heard.setdefault(member, now)
        self._move(room, rec, On.ASK_HEARD, rec.state)

    def snapshot_asked(
        self,
        room: str,
        request_id: str,
        requester: str,
        their_held_from: int | None,
        *,
        repair: bool,
        ours: OurMemory,
    ) -> None:
        """``requester`` asked us for our memory of ``room``; ``ours`` is what the store shows.

        Raises:
            RemoteProtocolError: the request came from ourselves, or says its hole ends
                before the log begins (the room is parked in ERROR).
        """
        rec = self._legal(room, On.SNAPSHOT_ASKED)
        if requester == self.me or (their_held_from is not None and their_held_from < 1):
            rec.state = S.ERROR
            raise RemoteProtocolError(f"a memory request in room {room} makes no sense")
        why = self._refusal(rec, requester, their_held_from, repair, ours)
        if why is not None:
            self._events.append(NotAnswered(room, requester, why))
            self._move(room, rec, On.SNAPSHOT_ASKED, rec.state)
            return
        after = rec.state
        if ours.hole:
            self._give_up(room, rec, f"{requester} missed more")
            after = S.CONCEDED
        self._commands.append(SendSnapshot(room, request_id, requester))
        self._move(room, rec, On.SNAPSHOT_ASKED, after)

    def snapshot_seen(self, room: str, sender: str) -> None:
        """``sender`` just sent a snapshot to someone: its memory has no hole now. We ask it
        next; if we were exhausted, at once, and we may not give our hole up before it has had
        our ask for :data:`RETRY_AFTER` (sim seed 127: two members each gave a different hole
        up, one of them seconds after the other had answered, and the memory forked)."""
        rec = self._legal(room, On.SNAPSHOT_SEEN)
        after = rec.state
        if rec.state in _HOLE and sender != self.me:
            rec.prefer = sender
            rec.heard.pop(sender, None)
            if rec.state is S.EXHAUSTED:
                rec.deadline, after = None, S.ASKING
        self._move(room, rec, On.SNAPSHOT_SEEN, after)

    def log_resumed(self, room: str, first: int, received_through: int) -> None:
        """The link is up again and the relay's log of ``room`` starts at ``first``: ops after
        ``received_through`` it dropped while we were away are gone, and nothing may come to
        show it, so probe."""
        rec = self._legal(room, On.LOG_RESUMED)
        if rec.state is not S.OUT and first - 1 > received_through:
            self._commands.append(PostProbe(room))
        self._move(room, rec, On.LOG_RESUMED, rec.state)

    # --- time ------------------------------------------------------------------------------------

    def tick(
        self, now: float, online: Collection[str], rosters: Mapping[str, Collection[str]]
    ) -> None:
        """Time passed: retry asks that are due, and look around if a look is due. ``online``
        are the members the relay sees; ``rosters`` the joined members of :meth:`rooms_due`."""
        for room, rec in sorted(self._rooms.items()):
            if rec.state in _HOLE and (rec.deadline or float("-inf")) <= now:
                self.retry_due(room, now, online, rosters.get(room, ()))
        if self._next_look is None or now < self._next_look:
            return
        self._next_look = now + PROBE_EVERY
        for room, rec in sorted(self._rooms.items()):
            if rec.state not in (S.OUT, S.ERROR):
                self.look_due(room, online, rosters.get(room, ()))

    def retry_due(
        self, room: str, now: float, online: Collection[str], roster: Collection[str]
    ) -> None:
        """Ask the next online member in this round (or give the hole up when alone)."""
        rec = self._legal(room, On.RETRY_DUE)
        others = [fp for fp in roster if fp != self.me]
        candidates = sorted(fp for fp in others if fp in online)
        first = rec.rounds == 0
        rec.rounds += 1
        rec.deadline = now + RETRY_AFTER
        fresh = [fp for fp in candidates if fp not in rec.tried]
        if not fresh:  # everyone had a turn: a new round, in the same order
            rec.tried, fresh = set(), candidates
        if rec.prefer in candidates:
            fresh = [rec.prefer]
        rec.prefer = None
        exhausted = rec.state is S.EXHAUSTED or (
            not first and _exhausted(candidates, rec.heard, now)
        )
        after = S.EXHAUSTED if exhausted else S.ASKING
        if not fresh and not first and not others:
            self._give_up(room, rec, "no other member")
            after = S.CONCEDED
        elif not fresh:
            self._events.append(NobodyToAsk(room))
        else:
            rec.tried.add(fresh[0])
            self._commands.append(AskForSnapshot(room, fresh[0], rec.generation))
        self._move(room, rec, On.RETRY_DUE, after)

    def look_due(self, room: str, online: Collection[str], roster: Collection[str]) -> None:
        """The periodic look: probe a room joined since start; ask for repairs."""
        rec = self._legal(room, On.LOOK_DUE)
        if rec.probe_due:
            rec.probe_due = False
            self._commands.append(PostProbe(room))
        after = rec.state
        if rec.state is S.CONCEDED and rec.journaled > JOURNAL_MAX:
            self._commands.append(DropJournal(room))
            after = S.IN_SYNC
        elif rec.state is S.CONCEDED:
            for fp in sorted(roster):
                if fp != self.me and fp in online and fp not in rec.repair_asked:
                    rec.repair_asked.add(fp)
                    self._commands.append(AskForRepair(room, fp))
        self._move(room, rec, On.LOOK_DUE, after)

    # --- internals -------------------------------------------------------------------------------

    def _refusal(
        self, rec: _Room, requester: str, their_held_from: int | None, repair: bool,
        ours: OurMemory,
    ) -> str | None:
        """Why we do not answer a request (None: we answer, giving our hole up if we have one)."""
        if rec.state is S.OUT:
            return "we are not in the room"
        if ours.hole and not self._may_concede(rec, requester, their_held_from, ours):
            return "our own memory has a hole"
        if repair and (ours.conceded or ours.hole):
            return "asked to repair, but our memory gave ops up too"
        return None

    def _may_concede(
        self, rec: _Room, requester: str, their_held_from: int | None, ours: OurMemory
    ) -> bool:
        """Exhausted, and the asker missed more than we did (the rule in the module note)."""
        if rec.state is not S.EXHAUSTED or their_held_from is None or ours.held_from is None:
            return False
        return (ours.held_from, self.me) < (their_held_from, requester)

    def _give_up(self, room: str, rec: _Room, why: str) -> None:
        self._commands.append(GiveUpHole(room, why))
        rec.deadline, rec.rounds, rec.tried, rec.heard, rec.prefer = None, 0, set(), {}, None
        rec.repair_asked, rec.journaled = set(), 0

    def _legal(self, room: str, happened: SyncInput) -> _Room:
        rec = self._rooms.setdefault(room, _Room())
        if happened not in TRANSITIONS.get(rec.state, {}):
            before, rec.state = rec.state, S.ERROR
            raise LocalProtocolError(
                f"memory sync of room {room} cannot take {happened.value} while {before.value}"
            )
        return rec

    def _move(self, room: str, rec: _Room, happened: SyncInput, after: SyncState) -> None:
        before = rec.state
        if after not in TRANSITIONS[before][happened]:
            rec.state = S.ERROR
            raise LocalProtocolError(
                f"memory sync of room {room} may not go from {before.value} to {after.value} "
                f"on {happened.value}"
            )
        rec.state = after
        self._events.append(Moved(room, before, happened, after))


def _exhausted(candidates: list[str], heard: dict[str, float], now: float) -> bool:
    """Every online member has had a sequenced ask of ours for RETRY_AFTER."""
    return bool(candidates) and all(
        fp in heard and heard[fp] + RETRY_AFTER <= now for fp in candidates
    )


def _to(*states: SyncState) -> frozenset[SyncState]:
    return frozenset(states)


# Per state, the inputs it takes and the states each may lead to; anything else raises and parks
# the room in ERROR, which only leaving the room gets out of (h11 ``_state.py`` keeps its table
# the same way). Inputs that arrive late by nature (an ask heard, a peer's request, a link-up)
# are legal everywhere but ERROR and change nothing where they no longer apply.
_LATE = (On.ASK_HEARD, On.SNAPSHOT_ASKED, On.SNAPSHOT_SEEN, On.LOG_RESUMED)


def _self_loops(
    state: SyncState, *extra: tuple[SyncInput, frozenset[SyncState]]
) -> dict[SyncInput, frozenset[SyncState]]:
    row = {happened: _to(state) for happened in _LATE}
    for happened, targets in extra:
        row[happened] = row.get(happened, frozenset()) | targets
    return row


TRANSITIONS: dict[SyncState, dict[SyncInput, frozenset[SyncState]]] = {
    S.OUT: _self_loops(S.OUT, (On.JOINED, _to(S.IN_SYNC)), (On.PROBED, _to(S.IN_SYNC))),
    S.IN_SYNC: _self_loops(
        S.IN_SYNC,
        (On.PROBED, _to(S.IN_SYNC)),
        (On.LEFT, _to(S.OUT)),
        (On.HOLE_SEEN, _to(S.ASKING)),
        (On.CONCEDED_SEEN, _to(S.CONCEDED)),
        (On.LOOK_DUE, _to(S.IN_SYNC)),
    ),
    S.ASKING: _self_loops(
        S.ASKING,
        (On.PROBED, _to(S.ASKING)),
        (On.LEFT, _to(S.OUT)),
        (On.HOLE_FILLED, _to(S.IN_SYNC)),
        (On.CONCEDED_SEEN, _to(S.CONCEDED)),
        (On.RETRY_DUE, _to(S.ASKING, S.EXHAUSTED, S.CONCEDED)),
        (On.LOOK_DUE, _to(S.ASKING)),
    ),
    S.EXHAUSTED: _self_loops(
        S.EXHAUSTED,
        (On.PROBED, _to(S.EXHAUSTED)),
        (On.LEFT, _to(S.OUT)),
        (On.HOLE_FILLED, _to(S.IN_SYNC)),
        (On.CONCEDED_SEEN, _to(S.CONCEDED)),
        (On.RETRY_DUE, _to(S.EXHAUSTED, S.CONCEDED)),
        (On.LOOK_DUE, _to(S.EXHAUSTED)),
        (On.SNAPSHOT_ASKED, _to(S.CONCEDED)),
        (On.SNAPSHOT_SEEN, _to(S.ASKING)),
    ),
    S.CONCEDED: _self_loops(
        S.CONCEDED,
        (On.PROBED, _to(S.CONCEDED)),
        (On.LEFT, _to(S.OUT)),
        (On.HOLE_SEEN, _to(S.ASKING)),
        (On.CONCEDED_SEEN, _to(S.CONCEDED)),
        (On.REPAIRED, _to(S.IN_SYNC)),
        (On.LOOK_DUE, _to(S.CONCEDED, S.IN_SYNC)),
    ),
    S.ERROR: {On.LEFT: _to(S.OUT)},
}
