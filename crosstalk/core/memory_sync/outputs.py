"""What the memory-sync machine says: its states, its inputs, its commands and its events.

Commands are what the shell must do (imperative names: post a request, write the store);
events are what happened that only wants telling (logged by the shell). Both are frozen values
and carry the room they are about.
"""

from __future__ import annotations

import enum

import attrs

RETRY_AFTER = 15.0  # seconds an ask has to be answered before the next member is asked
PROBE_EVERY = 15.0  # seconds between looks: rooms joined since start, members to repair
JOURNAL_MAX = 10_000  # ops a conceded memory keeps while it waits for a repair


class SyncState(enum.Enum):
    """Where one room's memory stands, as far as catching up goes."""

    OUT = "out"  # not a room we are in: never asked about, never repaired
    IN_SYNC = "in_sync"  # memory has every seq it can have
    ASKING = "asking"  # a hole: online members are asked in turn, round after round
    EXHAUSTED = "exhausted"  # asking, and every online member had an ask in vain: may concede
    CONCEDED = "conceded"  # a hole was given up; the journal waits for a complete member
    ERROR = "error"  # an illegal input arrived; only leaving the room gets out


class SyncInput(enum.Enum):
    """What can happen to one room (the columns of the transition table)."""

    JOINED = "joined"
    PROBED = "probed"
    LEFT = "left"
    HOLE_SEEN = "hole_seen"
    HOLE_FILLED = "hole_filled"
    CONCEDED_SEEN = "conceded_seen"
    REPAIRED = "repaired"
    RETRY_DUE = "retry_due"
    LOOK_DUE = "look_due"
    ASK_HEARD = "ask_heard"
    SNAPSHOT_ASKED = "snapshot_asked"
    SNAPSHOT_SEEN = "snapshot_seen"
    LOG_RESUMED = "log_resumed"


@attrs.frozen
class OurMemory:
    """What the store says of our memory of a room when a peer asks for it."""

    hole: bool  # a hole is open: we cannot answer (unless we give it up)
    held_from: int | None  # the first seq after the hole that we hold
    conceded: bool  # our memory gave a hole up (its snapshots say so)


# --- commands -------------------------------------------------------------------------------------


@attrs.frozen
class PostProbe:
    """Post a request that asks nobody, so the relay's sequencing shows a hole before it."""

    room: str


@attrs.frozen
class AskForSnapshot:
    """Note a fresh request id and post it to ``member``; report it sequenced with
    :meth:`MemorySyncState.ask_heard` and this ``generation``."""

    room: str
    member: str
    generation: int


@attrs.frozen
class AskForRepair:
    """Post a ``repair`` request to ``member``: only a memory that gave nothing up answers."""

    room: str
    member: str


@attrs.frozen
class SendSnapshot:
    """Send our memory of ``room`` to ``requester`` as signed pieces for ``request_id``."""

    room: str
    request_id: str
    requester: str


@attrs.frozen
class GiveUpHole:
    """Give the room's hole up in the store (its missing seqs count as no memory op)."""

    room: str
    why: str


@attrs.frozen
class DropJournal:
    """The journal outgrew :data:`JOURNAL_MAX`: drop it; the memory stays without those ops."""

    room: str


Command = PostProbe | AskForSnapshot | AskForRepair | SendSnapshot | GiveUpHole | DropJournal


# --- events ---------------------------------------------------------------------------------------


@attrs.frozen
class Moved:
    """One transition: ``room[BEFORE].input -> [AFTER]`` (the shell's trace line)."""

    room: str
    before: SyncState
    happened: SyncInput
    after: SyncState


@attrs.frozen
class NobodyToAsk:
    """A hole, and no other member online to ask yet."""

    room: str


@attrs.frozen
class NotAnswered:
    """A peer asked for our memory and got nothing: ``why`` says so."""

    room: str
    requester: str
    why: str


Event = Moved | NobodyToAsk | NotAnswered


class Outbox:
    """Where one owner's room machines put their commands and events, in order."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.events: list[Event] = []
        self._holes = 0

    def next_generation(self) -> int:
        """A number no earlier hole of any room had (an ask heard late names its hole)."""
        self._holes += 1
        return self._holes
