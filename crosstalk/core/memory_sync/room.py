"""One room's memory-sync machine (:class:`RoomSync`): its states, inputs and transition table.

Theory of operation
-------------------
The store keeps the memory (``store/memory_log.py`` follows the log, parks ops behind a hole,
installs snapshots, journals); this machine decides what to *do* about it, per room:

* **OUT.** A room we are not in is never asked about nor repaired; leaving forgets everything
  about it, so the asks of a later rejoin count afresh (sim seeds 4483, 8678).
* **Probing.** A room joined after start is probed at the next look (every
  :data:`PROBE_EVERY`): a request naming nobody, whose sequencing shows a hole before it. A
  link-up whose log starts past what we hold probes at once (``log_resumed``).
* **ASKING.** A hole asks one online member (never ourselves) at once, the one who invited us
  first, then the next one each :data:`RETRY_AFTER`, round after round in the same order (sim
  seed 1683). With nobody online
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

Invariants: a room asks only while the store shows a hole; the members converge on one memory
when all of them follow these rules (the pair harness in ``tests/core`` plays every interleaving
of small schedules); an input the table does not allow raises and parks the room in ERROR, which
only ``left`` gets out of.
"""

from __future__ import annotations

from collections.abc import Collection

from crosstalk.core.memory_sync.outputs import (
    JOURNAL_MAX,
    RETRY_AFTER,
    AskForRepair,
    AskForSnapshot,
    DropJournal,
    GiveUpHole,
    Moved,
    NobodyToAsk,
    NotAnswered,
    OurMemory,
    Outbox,
    PostProbe,
    SendSnapshot,
    SyncInput,
    SyncState,
)
from crosstalk.errors import LocalProtocolError, RemoteProtocolError

S, On = SyncState, SyncInput
HOLE = frozenset({S.ASKING, S.EXHAUSTED})


class RoomSync:
    """One room's machine; its commands and events go to the owner's ``out``."""

    def __init__(self, room: str, me: str, out: Outbox) -> None:
        self.room = room
        self.me = me
        self.state = S.OUT
        self._out = out
        self._forget()

    def _forget(self) -> None:
        self.probe_due = False  # joined since the start probe: probe at the next look
        self.journaled = 0
        self.repair_asked: set[str] = set()
        self._new_hole(0)

    def _new_hole(self, generation: int) -> None:
        self.generation = generation  # which hole; an ask heard for an older one does not count
        self.deadline: float | None = None  # the next ask (None: at once)
        self.rounds = 0  # asks tried for this hole (the first one never concedes)
        self.tried: set[str] = set()  # asked in this round
        self.prefer: str | None = None  # seen sending a snapshot: asked next, whatever the round
        self.heard: dict[str, float] = {}  # when the relay first sequenced our ask to each

    def due(self, now: float) -> bool:
        """An ask is due at ``now``."""
        return self.state in HOLE and (self.deadline or float("-inf")) <= now

    # --- what the store shows --------------------------------------------------------------------

    def joined(self) -> None:
        """We are in the room now (it will be probed at the next look)."""
        self._legal(On.JOINED)
        self.probe_due = True
        self._move(On.JOINED, S.IN_SYNC)

    def probed(self) -> None:
        """The room was probed at start: no probe at the next look."""
        self._legal(On.PROBED)
        self.probe_due = False
        self._move(On.PROBED, S.IN_SYNC if self.state is S.OUT else self.state)

    def left(self) -> None:
        """We are no longer in the room: forget its asks and repairs."""
        self._legal(On.LEFT)
        self._forget()
        self._move(On.LEFT, S.OUT)

    def hole_seen(self) -> None:
        """The store marked a hole (a conceded memory's journal ends there): ask at once."""
        self._legal(On.HOLE_SEEN)
        self._new_hole(self._out.next_generation())
        self.repair_asked = set()
        self._move(On.HOLE_SEEN, S.ASKING)

    def hole_filled(self) -> None:
        """A complete snapshot filled the hole."""
        self._legal(On.HOLE_FILLED)
        self._move(On.HOLE_FILLED, S.IN_SYNC)

    def conceded_seen(self, journaled: int) -> None:
        """The memory gave ops up (ours, or a conceded snapshot we installed) and journals
        ``journaled`` ops."""
        self._legal(On.CONCEDED_SEEN)
        if self.state is not S.CONCEDED:
            self.repair_asked = set()
        self.journaled = journaled
        self._move(On.CONCEDED_SEEN, S.CONCEDED)

    def repaired(self) -> None:
        """A complete member's snapshot was installed under the journal."""
        self._legal(On.REPAIRED)
        self._move(On.REPAIRED, S.IN_SYNC)

    # --- peers and the relay ---------------------------------------------------------------------

    def ask_heard(self, generation: int, member: str, now: float) -> None:
        """The relay sequenced our ask to ``member`` (from :class:`AskForSnapshot`)."""
        self._legal(On.ASK_HEARD)
        if self.state in HOLE and generation == self.generation:
            self.heard.setdefault(member, now)
        self._move(On.ASK_HEARD, self.state)

    def snapshot_asked(
        self, request_id: str, requester: str, their_held_from: int | None, *, repair: bool,
        ours: OurMemory,
    ) -> None:
        """``requester`` asked us for our memory; ``ours`` is what the store shows of it.

        Raises:
            RemoteProtocolError: the request came from ourselves, or says its hole ends
                before the log begins (the room is parked in ERROR).
        """
        self._legal(On.SNAPSHOT_ASKED)
        if requester == self.me or (their_held_from is not None and their_held_from < 1):
            self.state = S.ERROR
            raise RemoteProtocolError(f"a memory request in room {self.room} makes no sense")
        why = self._refusal(requester, their_held_from, repair, ours)
        if why is not None:
            self._out.events.append(NotAnswered(self.room, requester, why))
            self._move(On.SNAPSHOT_ASKED, self.state)
            return
        after = self.state
        if ours.hole:
            self._give_up(f"{requester} missed more")
            after = S.CONCEDED
        self._out.commands.append(SendSnapshot(self.room, request_id, requester))
        self._move(On.SNAPSHOT_ASKED, after)

    def snapshot_seen(self, sender: str) -> None:
        """``sender`` just sent a snapshot to someone: its memory has no hole now. We ask it
        next; if we were exhausted, at once, and we may not give our hole up before it has had
        our ask for :data:`RETRY_AFTER` (sim seed 127: two members each gave a different hole
        up, one of them seconds after the other had answered, and the memory forked)."""
        self._legal(On.SNAPSHOT_SEEN)
        after = self.state
        if self.state in HOLE and sender != self.me:
            self.prefer = sender
            self.heard.pop(sender, None)
            if self.state is S.EXHAUSTED:
                self.deadline, after = None, S.ASKING
        self._move(On.SNAPSHOT_SEEN, after)

    def log_resumed(self, first: int, received_through: int) -> None:
        """The link is up again and the relay's log starts at ``first``: ops after
        ``received_through`` it dropped while we were away are gone, and nothing may come to
        show it, so probe."""
        self._legal(On.LOG_RESUMED)
        if self.state is not S.OUT and first - 1 > received_through:
            self._out.commands.append(PostProbe(self.room))
        self._move(On.LOG_RESUMED, self.state)

    # --- time ------------------------------------------------------------------------------------

    def retry_due(
        self, now: float, online: Collection[str], roster: Collection[str],
        inviter: str | None = None,
    ) -> None:
        """Ask the next online member in this round (or give the hole up when alone). A new
        hole asks ``inviter`` first (who added us to the room): in the room before us, most
        likely whole, where the round's order would make a joiner wait a retry for each
        member that joined after it (bench/big_room.py: 19 guests each asking the others in
        turn, the last hole closed 225 s after the room was built)."""
        self._legal(On.RETRY_DUE)
        others = [fp for fp in roster if fp != self.me]
        candidates = sorted(fp for fp in others if fp in online)
        first = self.rounds == 0
        self.rounds += 1
        self.deadline = now + RETRY_AFTER
        fresh = [fp for fp in candidates if fp not in self.tried]
        if not fresh:  # everyone had a turn: a new round, in the same order
            self.tried, fresh = set(), candidates
        if self.prefer in candidates:
            fresh = [self.prefer]
        elif first and inviter in fresh:
            fresh = [inviter]
        self.prefer = None
        exhausted = self.state is S.EXHAUSTED or (
            not first and _exhausted(candidates, self.heard, now)
        )
        after = S.EXHAUSTED if exhausted else S.ASKING
        if not fresh and not first and not others:
            self._give_up("no other member")
            after = S.CONCEDED
        elif not fresh:
            self._out.events.append(NobodyToAsk(self.room))
        else:
            self.tried.add(fresh[0])
            self._out.commands.append(AskForSnapshot(self.room, fresh[0], self.generation))
        self._move(On.RETRY_DUE, after)

    def look_due(self, online: Collection[str], roster: Collection[str]) -> None:
        """The periodic look: probe a room joined since start; ask for repairs."""
        self._legal(On.LOOK_DUE)
        if self.probe_due:
            self.probe_due = False
            self._out.commands.append(PostProbe(self.room))
        after = self.state
        if self.state is S.CONCEDED and self.journaled > JOURNAL_MAX:
            self._out.commands.append(DropJournal(self.room))
            after = S.IN_SYNC
        elif self.state is S.CONCEDED:
            for fp in sorted(roster):
                if fp != self.me and fp in online and fp not in self.repair_asked:
                    self.repair_asked.add(fp)
                    self._out.commands.append(AskForRepair(self.room, fp))
        self._move(On.LOOK_DUE, after)

    # --- internals -------------------------------------------------------------------------------

    def _refusal(
        self, requester: str, their_held_from: int | None, repair: bool, ours: OurMemory
    ) -> str | None:
        """Why we do not answer a request (None: we answer, giving our hole up if we have one)."""
        if self.state is S.OUT:
            return "we are not in the room"
        if ours.hole and not self._may_concede(requester, their_held_from, ours):
            return "our own memory has a hole"
        if repair and (ours.conceded or ours.hole):
            return "asked to repair, but our memory gave ops up too"
        return None

    def _may_concede(self, requester: str, their_held_from: int | None, ours: OurMemory) -> bool:
        """Exhausted, and the asker missed more than we did (the rule in the module note)."""
        if self.state is not S.EXHAUSTED or their_held_from is None or ours.held_from is None:
            return False
        return (ours.held_from, self.me) < (their_held_from, requester)

    def _give_up(self, why: str) -> None:
        self._out.commands.append(GiveUpHole(self.room, why))
        self._new_hole(self.generation)
        self.repair_asked, self.journaled = set(), 0

    def _legal(self, happened: SyncInput) -> None:
        if happened not in TRANSITIONS[self.state]:
            before, self.state = self.state, S.ERROR
            raise LocalProtocolError(
                f"memory sync of room {self.room} cannot take {happened.value} while "
                f"{before.value}"
            )

    def _move(self, happened: SyncInput, after: SyncState) -> None:
        before = self.state
        if after not in TRANSITIONS[before][happened]:
            self.state = S.ERROR
            raise LocalProtocolError(
                f"memory sync of room {self.room} may not go from {before.value} to "
                f"{after.value} on {happened.value}"
            )
        self.state = after
        self._out.events.append(Moved(self.room, before, happened, after))


def _exhausted(candidates: list[str], heard: dict[str, float], now: float) -> bool:
    """Every online member has had a sequenced ask of ours for RETRY_AFTER."""
    return bool(candidates) and all(
        fp in heard and heard[fp] + RETRY_AFTER <= now for fp in candidates
    )


def _to(*states: SyncState) -> frozenset[SyncState]:
    return frozenset(states)


# Per state, the inputs it takes and the states each may lead to; anything else raises and parks
# the room in ERROR, which only leaving the room gets out of (h11 ``_state.py`` keeps its table
# the same way). Inputs that arrive late by nature (an ask heard, a peer's request or snapshot,
# a link-up) are legal everywhere but ERROR and change nothing where they no longer apply.
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
