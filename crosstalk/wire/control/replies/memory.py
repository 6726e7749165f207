"""The replies of the room-memory ops: facts, tasks, decisions, reservations, edits.

Each is the model of one op's reply in the op table (:mod:`crosstalk.wire.control.table`),
or a view nested in one; the daemon unstructures it through the one converter.
"""

from __future__ import annotations

import attrs

from crosstalk.wire.converter import rename_fields

# Why an answer is ``pending`` (its ``why_pending``): the op was not ordered and applied here in
# time (it is settled later), or it was decided on a room memory that gave ops up (a hole no
# member could fill), where a repair that brings those ops back may decide it otherwise. The
# answer is final only once that memory is whole; ``provisional`` says what it decided for now.
UNDECIDED = "undecided"
MEMORY_INCOMPLETE = "memory_incomplete"


@attrs.frozen
class FileView:
    repo: str
    path: str


@attrs.frozen
class TouchedReply:
    files: list[FileView]
    rooms: list[str]  # the room ids told (once due)


@attrs.frozen
class CheckReply:
    text: str | None
    decision: str


@attrs.frozen
class EditView:
    label: str
    fingerprint: str
    session: str
    repo: str
    path: str
    edited_at: float
    note: str = ""
    room: str | None = None


@attrs.frozen
class RoomShare:
    room: str
    id: str
    share: bool


@attrs.frozen
class EditsReply:
    edits: list[EditView]
    mine: list[EditView]
    on_reserved: str
    window_minutes: float
    rooms: list[RoomShare]


@attrs.frozen
class ReserveReply:
    id: str
    paths: list[str]
    room: str
    repo: str
    until: float | None  # relay time; None while pending (unless granted provisionally)
    shared: bool
    state: str  # granted | renewed | pending
    why_pending: str | None = None  # UNDECIDED | MEMORY_INCOMPLETE while pending
    provisional: str | None = None  # MEMORY_INCOMPLETE: what it decided for now (granted, ...)


@attrs.frozen
class ReleaseReply:
    released: list[str]
    pending: list[str] = attrs.Factory(list)  # rooms whose release the relay has not sequenced


@attrs.frozen
class ReservationView:
    id: str
    holder: str
    holder_fingerprint: str
    mine: bool
    paths: list[str]
    repo: str
    room: str
    room_id: str
    until: float
    shared: bool
    reason: str
    granted_at: float


@attrs.frozen
class ReservationsReply:
    reservations: list[ReservationView]
    now: float  # the relay time they were read at
    incomplete: list[str] = attrs.Factory(list)  # rooms whose memory gave ops up: provisional


@attrs.frozen
class WriteReply:
    """What a fact/task write did: ``outcome`` is the replicated result, or ``pending``."""

    id: str
    room: str
    outcome: str
    why_pending: str | None = None  # UNDECIDED | MEMORY_INCOMPLETE while pending
    provisional: str | None = None  # MEMORY_INCOMPLETE: the outcome for now


@attrs.frozen
class ClaimReply:
    id: str
    room: str
    outcome: str  # won | lost | pending
    claimed_by: str | None  # while pending on MEMORY_INCOMPLETE: the holder for now
    why_pending: str | None = None  # UNDECIDED | MEMORY_INCOMPLETE while pending
    provisional: str | None = None  # MEMORY_INCOMPLETE: won or lost, for now


@attrs.frozen
class DecideReply:
    file: str
    id: str
    room: str | None


@attrs.frozen
class RoomMemoryView:
    """Where one room's memory stands; equal ``state_hash`` at equal ``last_seq`` = in agreement."""

    room: str
    id: str
    last_seq: int
    state_hash: str
    catching_up: bool
    incomplete: bool = False  # gave ops up, not repaired yet: what it decides is provisional


@attrs.frozen
class MemoryStateReply:
    rooms: list[RoomMemoryView]


@attrs.frozen
class WorkingSetReply:
    text: str
    repo: str | None
    facts_total: int
    tasks_total: int


@attrs.frozen
class FactView:
    id: str
    text: str
    room: str
    by: list[str]
    age_s: float
    tags: list[str]


@attrs.frozen
class FactsReply:
    facts: list[FactView]
    catching_up: list[str]
    incomplete: list[str] = attrs.Factory(list)  # rooms whose memory gave ops up (memory_log)


@attrs.frozen
class TaskView:
    id: str
    text: str
    room: str
    state: str
    claimed_by: str | None
    for_: str | None
    by: str
    note: str


@attrs.frozen
class TasksReply:
    tasks: list[TaskView]
    catching_up: list[str]
    incomplete: list[str] = attrs.Factory(list)


# "for" is a Python keyword: the attribute is ``for_``, the JSON key "for".
rename_fields(TaskView, for_="for")


@attrs.frozen
class DecisionView:
    """One decision as ``crosstalk decisions`` lists it (CLI.md)."""

    id: str
    text: str
    why: str
    by: str
    room: str
    ts: float
    repo: str


@attrs.frozen
class DecisionsReply:
    decisions: list[DecisionView]
