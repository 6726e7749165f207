"""Wire models for room memory: the ops people send, the records every replica keeps, snapshots.

A memory op travels inside a sealed room op. On the wire it is a JSON object whose ``"op"`` key
names its kind (``"fact_add"``, ``"task_claim"``, …); the :data:`MemoryOp` union is registered with
the one converter as a tagged union under that key. :class:`OpContext` is not sent by the author:
the receiving daemon builds it from the envelope around the op (the relay's sequence number, the
verified sender fingerprint, the sender's label, the timestamp, the op id).

The records (:class:`FactRecord`, :class:`TaskRecord`, :class:`DecisionRecord`) and
:class:`Outcome` are what :class:`crosstalk.core.memory.MemoryState` keeps, and
:class:`MemorySnapshot` carries all of them, so a member back from a long absence can start from a
snapshot. People are named by fingerprint (stable across every replica) plus the label they gave
themselves (for display only; the daemon may prefer its own name for that fingerprint).
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable
from typing import Any, cast

import attrs
from cattrs.errors import BaseValidationError

from crosstalk.errors import RemoteProtocolError
from crosstalk.wire.converter import converter, rename_fields, tagged_union
from crosstalk.wire.people import Person
from crosstalk.wire.reservations import (
    RESERVATION_OP_TAGS,
    ReleaseOp,
    RenewOp,
    ReservationSnapshot,
    ReserveOp,
)

__all__ = ["Person"]  # re-exported: memory's records name people

SNAPSHOT_VERSION = 1


def _finite(_instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not math.isfinite(value):
        raise ValueError(f"{attribute.name} must be a finite number, not {value!r}")


def _positive(_instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, not {value!r}")


@attrs.frozen
class OpContext:
    """Where an op sits in the room log and who sent it, taken from the envelope around it.

    ``ts`` is seconds since the Unix epoch (UTC), the author's clock; ``seq`` is the relay's
    per-room sequence number and ``relay_ts`` the relay's time for the op (what reservations
    lapse by; 0 where it is not known, and then ``ts`` stands in).
    """

    seq: int = attrs.field(validator=_positive)
    op_id: str
    sender: str
    sender_label: str
    ts: float = attrs.field(converter=float, validator=_finite)
    relay_ts: float = attrs.field(default=0.0, converter=float, validator=_finite)

    @property
    def person(self) -> Person:
        """The sender as a :class:`Person`."""
        return Person(self.sender, self.sender_label)


# --- ops ---------------------------------------------------------------------------------------


@attrs.frozen
class FactAdd:
    """Add a fact. ``tags`` are repository names; no tags means it applies everywhere."""

    fact_id: str
    text: str
    tags: tuple[str, ...] = ()


@attrs.frozen
class FactConfirm:
    """Stand behind a fact: adds the sender's name and resets its age."""

    fact_id: str


@attrs.frozen
class FactCorrect:
    """Replace a fact's text, saying why. The old text stays in its history."""

    fact_id: str
    text: str
    because: str


@attrs.frozen
class FactForget:
    """Mark a fact forgotten. It is kept (with who forgot it) but no longer shown as live."""

    fact_id: str


@attrs.frozen
class TaskAdd:
    """Add a task for one person, or (``for_`` None) open to anyone. Wire key: ``for``."""

    task_id: str
    text: str
    for_: Person | None = None


@attrs.frozen
class TaskClaim:
    """Take a task. The first claim in room-log order on an open task wins."""

    task_id: str


@attrs.frozen
class TaskRelease:
    """Give a claimed task back (only its claimer can)."""

    task_id: str


@attrs.frozen
class TaskDone:
    """Finish a task, with an optional note."""

    task_id: str
    note: str = ""


@attrs.frozen
class TaskDrop:
    """Abandon a task: nobody will do it. It is kept, marked dropped."""

    task_id: str


@attrs.frozen
class DecisionMade:
    """A settled decision, announced in the room (the author's daemon writes DECISIONS.md)."""

    decision_id: str
    text: str
    why: str
    repo: str


MemoryOp = (
    FactAdd
    | FactConfirm
    | FactCorrect
    | FactForget
    | TaskAdd
    | TaskClaim
    | TaskRelease
    | TaskDone
    | TaskDrop
    | DecisionMade
    | ReserveOp
    | RenewOp
    | ReleaseOp
)

OP_TAGS: dict[type, str] = {
    FactAdd: "fact_add",
    FactConfirm: "fact_confirm",
    FactCorrect: "fact_correct",
    FactForget: "fact_forget",
    TaskAdd: "task_add",
    TaskClaim: "task_claim",
    TaskRelease: "task_release",
    TaskDone: "task_done",
    TaskDrop: "task_drop",
    DecisionMade: "decision_made",
    **RESERVATION_OP_TAGS,
}


# --- records -----------------------------------------------------------------------------------


@attrs.frozen
class Confirmation:
    """One person standing behind a fact's current text, most recently at ``at``."""

    by: Person
    at: float


@attrs.frozen
class Revision:
    """One correction: the text it replaced, who stood behind that text, who corrected it, why."""

    previous_text: str
    previous_by: Person
    previous_confirmations: tuple[Confirmation, ...]
    corrected_by: Person
    because: str
    at: float
    seq: int


@attrs.frozen
class Forgetting:
    """Who marked a fact forgotten, and when."""

    by: Person
    at: float
    seq: int


@attrs.frozen
class FactRecord:
    """A fact as every replica keeps it.

    ``author`` added it and never changes. ``text_by`` stands behind the current text: the author,
    or the last person who corrected it. ``confirmations`` are for the current text only (a
    correction moves them into its :class:`Revision`). ``last_affirmed`` is the latest time anyone
    added, confirmed or corrected it.
    """

    fact_id: str
    text: str
    tags: tuple[str, ...]
    author: Person
    added_at: float
    added_seq: int
    text_by: Person
    confirmations: tuple[Confirmation, ...] = ()
    revisions: tuple[Revision, ...] = ()
    forgotten: Forgetting | None = None
    last_affirmed: float = 0.0

    @property
    def live(self) -> bool:
        """True unless somebody forgot it."""
        return self.forgotten is None

    def age_s(self, now: float) -> float:
        """Seconds since anyone last stood behind this fact (never negative)."""
        return max(0.0, now - self.last_affirmed)

    def applies_to(self, repo: str | None) -> bool:
        """True for a global fact, or one tagged with ``repo`` (compared case-insensitively)."""
        if not self.tags:
            return True
        if repo is None:
            return False
        wanted = repo.casefold()
        return any(tag.casefold() == wanted for tag in self.tags)


class TaskState(enum.Enum):
    """Where a task is in its life. DONE and DROPPED are final."""

    OPEN = "open"
    CLAIMED = "claimed"
    DONE = "done"
    DROPPED = "dropped"


@attrs.frozen
class TaskRecord:
    """A task as every replica keeps it. ``claimer`` is set only while CLAIMED."""

    task_id: str
    text: str
    for_: Person | None
    created_by: Person
    added_at: float
    added_seq: int
    state: TaskState = TaskState.OPEN
    claimer: Person | None = None
    claimed_at: float | None = None
    closed_by: Person | None = None
    closed_at: float | None = None
    note: str = ""


@attrs.frozen
class DecisionRecord:
    """A decision announced in the room."""

    decision_id: str
    text: str
    why: str
    repo: str
    by: Person
    at: float
    seq: int


class OutcomeCode(enum.Enum):
    """What applying one op did. Every replica computes the same code for the same op."""

    APPLIED = "applied"  # the op changed the state as asked
    WON = "won"  # a claim that holds the task (also a re-claim by the holder)
    LOST = "lost"  # a claim on a task someone else holds; ``winner`` names them
    UNKNOWN_ID = "unknown_id"  # no fact, task or decision with that id
    ALREADY_EXISTS = "already_exists"  # an add whose id is taken; the first add stands
    FORGOTTEN = "forgotten"  # the fact was already forgotten
    NOT_CLAIMER = "not_claimer"  # release/done/drop of a task someone else holds
    NOT_CLAIMED = "not_claimed"  # release of a task nobody holds
    CLOSED = "closed"  # the task is already done or dropped
    REFUSED = "refused"  # a reservation that overlaps someone else's, or one too many
    INVALID = "invalid"  # a reservation naming a path or glob no replica reads


@attrs.frozen
class Outcome:
    """The result of one op, kept per op id so ``claim`` can answer once the op is sequenced.

    ``winner`` is set for claims (who holds the task) and for NOT_CLAIMER (who does).
    ``duplicate`` is True only on the value returned when an already applied op arrives again.
    """

    op_id: str
    seq: int
    code: OutcomeCode
    winner: Person | None = None
    duplicate: bool = False

    @property
    def claim_answer(self) -> str | None:
        """``"won"`` or ``"lost"`` for a claim's outcome, as ``tasks claim`` reports it."""
        if self.code is OutcomeCode.WON:
            return "won"
        if self.code in (OutcomeCode.LOST, OutcomeCode.CLOSED, OutcomeCode.UNKNOWN_ID):
            return "lost"
        return None


@attrs.frozen
class MemorySnapshot:
    """A room's whole memory after op ``last_seq``; the signer signs its canonical bytes."""

    room_id: str
    last_seq: int
    facts: tuple[FactRecord, ...]
    tasks: tuple[TaskRecord, ...]
    decisions: tuple[DecisionRecord, ...]
    outcomes: tuple[Outcome, ...]
    version: int = SNAPSHOT_VERSION
    reservations: ReservationSnapshot | None = None  # None: no reservation op yet


# --- converter registration --------------------------------------------------------------------

# ``for`` is a Python keyword, so the attribute is ``for_`` and the wire key is ``for``.
for _cls in (TaskAdd, TaskRecord):
    rename_fields(_cls, structure=True, for_="for")

tagged_union(MemoryOp, tag_generator=OP_TAGS.__getitem__, tag_name="op")


def parse_memory_op(data: Any) -> MemoryOp:
    """Structure a memory op received from a peer, or raise one RemoteProtocolError.

    (``structure_remote`` names the class in its message, which a union does not have.)
    """
    try:
        return cast(MemoryOp, _op_hook()(data, MemoryOp))
    except (BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise RemoteProtocolError(f"malformed memory op: {exc!r}") from None


@functools.cache
def _op_hook() -> Callable[[Any, Any], Any]:
    """The union's structure hook, looked up once: ``converter.structure(data, MemoryOp)`` finds
    it again for every op, and hashing the union to do so is ~2 us of a catch-up's ~10 us
    decode. What it calls is the same (``structure`` is ``get_structure_hook(cl)(data, cl)``);
    before the union's first use this is the placeholder that configures it."""
    return converter.get_structure_hook(MemoryOp)
