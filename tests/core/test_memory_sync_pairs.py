"""Memory-sync machines wired to each other through a tiny room log, over every interleaving.

Each member is a real :class:`MemorySyncState` over a toy store: the seqs of the room's memory it
holds, whether a hole is open, whether it gave ops up and journals. Whatever one posts (an ask, a
snapshot) goes into one ordered log that every member reads at its own pace, as at the relay. A
schedule gives each member a few steps (tick at a time, read the next op of the log); every
interleaving of those steps is played, then the members run side by side until quiet, and they
must agree (h11's ``ConnectionPair``; wormhole's ``test_machines``).
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from crosstalk.core.memory_sync import (
    PROBE_EVERY,
    RETRY_AFTER,
    AskForRepair,
    AskForSnapshot,
    Command,
    DropJournal,
    GiveUpHole,
    MemorySyncState,
    OurMemory,
    PostProbe,
    RoomSync,
    SendSnapshot,
    SyncState,
)

R = "room"
Step = tuple[str, float | None]  # ("tick", now) or ("read", None)


@attrs.frozen
class Ask:
    sender: str
    to: str
    request_id: str
    held_from: int | None
    repair: bool


@attrs.frozen
class Snapshot:
    sender: str
    request_id: str
    memory: frozenset[int]
    conceded: bool


@attrs.define
class Member:
    """One daemon: its machine and a toy memory store."""

    name: str
    sync: MemorySyncState
    held: frozenset[int]  # the seqs it holds (after its hole, if it has one)
    hole: bool
    online_from: float = 0.0
    memory: frozenset[int] = frozenset()
    conceded: bool = False
    journaling: bool = False
    request_id: str | None = None  # the ask whose snapshot fills our hole
    now: float = 0.0
    read: int = 0
    asks: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.hole:
            self.memory = self.held

    def ours(self) -> OurMemory:
        return OurMemory(self.hole, min(self.held) if self.hole else None, self.conceded)


class Room:
    """The log every member reads, and the members; ``machine`` builds each one's machine."""

    def __init__(self, members: dict[str, tuple[frozenset[int], bool, float]],
                 machine: type[MemorySyncState] = MemorySyncState) -> None:
        self.log: list[Ask | Snapshot] = []
        self.members = {
            name: Member(name, machine(name), held, hole, online_from)
            for name, (held, hole, online_from) in members.items()
        }
        for member in self.members.values():
            member.sync.started([R], 0.0)

    def online(self, now: float) -> set[str]:
        return {m.name for m in self.members.values() if m.online_from <= now}

    def observe(self, m: Member) -> None:
        repairing = {R: 1} if m.journaling and not m.hole else {}
        m.sync.observe([R], {R} if m.hole else set(), repairing)

    def step(self, m: Member, step: Step) -> None:
        kind, now = step
        self.observe(m)
        if kind == "tick":
            assert now is not None
            m.now = now
            m.sync.tick(now, self.online(now), {R: list(self.members)})
        elif m.read < len(self.log):
            m.read += 1
            self.take(m, self.log[m.read - 1])
        self.carry_out(m)

    def take(self, m: Member, op: Ask | Snapshot) -> None:
        if isinstance(op, Ask):
            if op.to == m.name:
                m.sync.room(R).snapshot_asked(op.request_id, op.sender, op.held_from,
                                      repair=op.repair, ours=m.ours())
            return
        wanted = m.hole and op.request_id == m.request_id
        if wanted or (m.journaling and not m.hole and not op.conceded):
            m.memory, m.hole, m.conceded, m.journaling = op.memory, False, op.conceded, op.conceded
        if op.sender != m.name:  # the room transaction installed it (or not); then we are told
            self.observe(m)
            m.sync.room(R).snapshot_seen(op.sender)

    def carry_out(self, m: Member) -> None:
        for command in m.sync.commands_to_send():
            self.do(m, command)
        m.sync.events()

    def do(self, m: Member, command: Command) -> None:
        if isinstance(command, AskForSnapshot):
            m.asks += 1
            m.request_id = f"{m.name}-{m.asks}"
            self.log.append(Ask(m.name, command.member, m.request_id, min(m.held), False))
            m.sync.room(R).ask_heard(command.generation, command.member, m.now)  # sequenced at once
        elif isinstance(command, AskForRepair):
            self.log.append(Ask(m.name, command.member, f"{m.name}-fix", None, True))
        elif isinstance(command, SendSnapshot) and not m.hole:
            self.log.append(Snapshot(m.name, command.request_id, m.memory, m.conceded))
        elif isinstance(command, GiveUpHole) and m.hole:
            m.memory, m.hole, m.conceded, m.journaling = m.held, False, True, True
        elif isinstance(command, DropJournal):
            m.journaling = False
        else:
            assert isinstance(command, PostProbe | SendSnapshot | GiveUpHole)

    def settle(self, start: float) -> None:
        """Everyone ticks and reads everything, round after round, until nothing is posted for
        four rounds (long enough for a retry and a look to have come and gone)."""
        quiet = 0
        for n in range(40):
            if quiet == 4:
                return
            posted = len(self.log)
            now = start + n * RETRY_AFTER
            for m in self.members.values():
                self.drain(m)
                self.step(m, ("tick", now))
                self.drain(m)
            quiet = quiet + 1 if len(self.log) == posted else 0

    def drain(self, m: Member) -> None:
        while m.read < len(self.log):
            self.step(m, ("read", None))

    def memories(self) -> dict[str, tuple[bool, frozenset[int]]]:
        return {m.name: (m.hole, m.memory) for m in self.members.values()}


def interleavings(plans: dict[str, list[Step]]) -> Iterator[list[tuple[str, Step]]]:
    """Every order of the members' steps that keeps each member's own steps in order."""
    if not any(plans.values()):
        yield []
        return
    for name, steps in plans.items():
        if steps:
            rest = {**plans, name: steps[1:]}
            for tail in interleavings(rest):
                yield [(name, steps[0]), *tail]


def play(
    members: dict[str, tuple[frozenset[int], bool, float]],
    plans: dict[str, list[Step]],
    machine: type[MemorySyncState] = MemorySyncState,
) -> Iterator[dict[str, tuple[bool, frozenset[int]]]]:
    """The members' memories at the end of each interleaving, once settled."""
    for order in interleavings(plans):
        room = Room(members, machine)
        for name, step in order:
            room.step(room.members[name], step)
        room.settle(PROBE_EVERY * 10)
        yield room.memories()


def rounds(*times: float) -> list[Step]:
    return [s for t in times for s in (("tick", t), ("read", None))]


# Nobody holds seqs 1-2. Ann's hole ends at 3, Bob's at 5: Ann missed least.
SPLIT = {
    "ann": (frozenset({3, 4, 5, 6}), True, 0.0),
    "bob": (frozenset({5, 6}), True, 0.0),
}


def test_two_members_with_holes_nobody_can_fill_agree_on_the_one_that_missed_least() -> None:
    """Whatever the order of ticks and reads, both end with Ann's memory (3-6), no hole."""
    plans = {"ann": rounds(0.0, 15.0, 30.0), "bob": rounds(0.0, 15.0, 30.0)}
    outcomes = list(play(SPLIT, plans))
    assert len(outcomes) == 924
    for memories in outcomes:
        assert memories == {"ann": (False, frozenset({3, 4, 5, 6})),
                            "bob": (False, frozenset({3, 4, 5, 6}))}


def test_a_complete_member_back_online_repairs_everyone() -> None:
    """Cy holds everything but is offline until 30: whether the others conceded meanwhile or
    not, every order ends with all three holding 1-6."""
    members = {**SPLIT, "cy": (frozenset(range(1, 7)), False, 30.0)}
    plans = {"ann": rounds(0.0, 15.0), "bob": rounds(0.0, 15.0), "cy": [("read", None)] * 2}
    whole = (False, frozenset(range(1, 7)))
    for memories in play(members, plans):
        assert memories == {"ann": whole, "bob": whole, "cy": whole}


class ConcedesToAnyoneRoom(RoomSync):
    """Planted bug: an exhausted member gives its hole up to any asker, not only to one that
    missed more, so both members of SPLIT may concede and their memories fork."""

    def _may_concede(self, *args: object, **kwargs: object) -> bool:
        return self.state is SyncState.EXHAUSTED


class ConcedesToAnyone(MemorySyncState):
    room_machine = ConcedesToAnyoneRoom


def test_the_harness_catches_a_concession_to_a_member_that_missed_less() -> None:
    """With the planted bug, some interleaving ends with Ann and Bob holding different memories."""
    plans = {"ann": rounds(0.0, 15.0, 30.0), "bob": rounds(0.0, 15.0, 30.0)}
    forked = [m for m in play(SPLIT, plans, ConcedesToAnyone) if m["ann"] != m["bob"]]
    assert forked


def test_three_members_with_holes_nobody_can_fill_agree() -> None:
    """Ann (hole ends at 3), Cy (4) and Bob (5): every order ends with one memory, no hole."""
    members = {**SPLIT, "cy": (frozenset({4, 5, 6}), True, 0.0)}
    plans = {"ann": rounds(0.0), "bob": rounds(0.0, 15.0), "cy": rounds(0.0, 15.0)}
    results = {tuple(sorted(m.items())) for m in play(members, plans)}
    forked = [r for r in results if len({memory for _, memory in r}) > 1]
    assert not forked, forked[:3]
