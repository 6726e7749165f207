"""The room-memory part of the op table (:mod:`crosstalk.wire.control.table` lists it with the
rest): facts, tasks, decisions, the working set and reservations."""

from __future__ import annotations

from crosstalk import errors as e
from crosstalk.wire.control import params as p
from crosstalk.wire.control.replies import memory as rmem
from crosstalk.wire.control.spec import OpSpec

_ROOM = (e.UnknownRoom, e.UsageError)
_REPO = (e.UnknownRoom, e.NotInRepository, e.UsageError)
_WRITE = (*_ROOM, e.NotAMember)  # a write is sent into the room: not if we were removed
# What a write's ``pending`` means; its reply says which in ``why_pending``.
_PENDING = (
    " Pending while not final: `undecided` until the relay orders it, or `memory_incomplete`"
    " when decided on a room memory that gave ops up (`provisional` says how, for now; final"
    " once a member who holds them repairs it)."
)

# --- room memory ---------------------------------------------------------------------------------

MEMORY_STATE = OpSpec(
    "memory_state",
    p.Where,
    _ROOM,
    "A room's facts, tasks and reservations.",
    reply=rmem.MemoryStateReply,
)
FACTS = OpSpec("facts", p.ListParams, _ROOM, "A room's facts.", reply=rmem.FactsReply)
TASKS = OpSpec("tasks", p.ListParams, _ROOM, "A room's tasks.", reply=rmem.TasksReply)
WORKING_SET = OpSpec(
    "working_set",
    p.WorkingSetParams,
    _REPO,
    "What a session should know now: open tasks, facts, reservations.",
    reply=rmem.WorkingSetReply,
)
FACT_ADD = OpSpec(
    "fact_add",
    p.FactAddParams,
    (*_WRITE, e.TooLarge),
    "State a fact in a room.",
    reply=rmem.WriteReply,
)
FACT_CONFIRM = OpSpec(
    "fact_confirm",
    p.IdParams,
    (*_WRITE, e.UnknownFact),
    "Stand behind a fact.",
    reply=rmem.WriteReply,
)
FACT_CORRECT = OpSpec(
    "fact_correct",
    p.FactCorrectParams,
    (*_WRITE, e.UnknownFact, e.NeedsReason),
    "Correct a fact, saying why.",
    reply=rmem.WriteReply,
)
FACT_FORGET = OpSpec(
    "fact_forget", p.IdParams, (*_WRITE, e.UnknownFact), "Retire a fact.", reply=rmem.WriteReply
)
TASK_ADD = OpSpec(
    "task_add",
    p.TaskAddParams,
    (*_WRITE, e.UnknownPeer, e.TooLarge),
    "Add a task to a room's list.",
    reply=rmem.WriteReply,
)
TASK_CLAIM = OpSpec(
    "task_claim",
    p.IdParams,
    (*_WRITE, e.UnknownTask, e.ClaimedByOther),
    "Claim a task: won or lost." + _PENDING,
    reply=rmem.ClaimReply,
)
TASK_RELEASE = OpSpec(
    "task_release",
    p.IdParams,
    (*_WRITE, e.UnknownTask),
    "Give a claimed task back.",
    reply=rmem.WriteReply,
)
TASK_DROP = OpSpec(
    "task_drop",
    p.IdParams,
    (*_WRITE, e.UnknownTask),
    "Drop a task from the list.",
    reply=rmem.WriteReply,
)
TASK_DONE = OpSpec(
    "task_done",
    p.TaskDoneParams,
    (*_WRITE, e.UnknownTask),
    "Mark a task done, with a note.",
    reply=rmem.WriteReply,
)
DECIDE = OpSpec(
    "decide",
    p.DecideParams,
    (*_REPO, e.UnknownPeer, e.TooLarge, e.NotAMember),
    "Record a decision (and its file in the repository); every member is told.",
    reply=rmem.DecideReply,
)
DECISIONS = OpSpec(
    "decisions", p.DecisionsParams, _ROOM, "A room's decisions.", reply=rmem.DecisionsReply
)
_HOLDING = (
    *_REPO,
    e.Refused,
    e.LocalProtocolError,
    e.NotAMember,
)  # over the limit; an outcome that cannot be
RESERVE = OpSpec(
    "reserve",
    p.ReserveParams,
    (*_HOLDING, e.Reserved, e.UnknownReservation),
    "Reserve paths in a repository for some minutes: granted, or refused (`reserved`)."
    + _PENDING,
    reply=rmem.ReserveReply,
)
RESERVE_RENEW = OpSpec(
    "reserve_renew",
    p.RenewParams,
    (*_HOLDING, e.Reserved, e.UnknownReservation),
    "Extend one of your reservations." + _PENDING,
    reply=rmem.ReserveReply,
)
RELEASE = OpSpec(
    "release",
    p.ReleaseParams,
    (*_HOLDING, e.UnknownReservation),
    "Release reservations, by id or path.",
    reply=rmem.ReleaseReply,
)
RESERVATIONS = OpSpec(
    "reservations",
    p.ReservationsParams,
    _REPO,
    "The reservations held in a room.",
    reply=rmem.ReservationsReply,
)
