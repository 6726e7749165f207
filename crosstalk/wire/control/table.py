"""The one table of control ops: every op the daemon serves, as an :class:`OpSpec`.

Features register a handler against a spec (``op(SEND, handler)``); the control server
dispatches by it; ``docs/control.md`` is written from it (``python -m crosstalk.wire.control.docs
--write docs/control.md``). An op that is not in :data:`OPS` cannot be served, and a test checks
that every op here is served by exactly one feature.
"""

from __future__ import annotations

from typing import Any

from crosstalk.errors import (
    AlreadySetUp,
    ClaimedByOther,
    CredentialRefused,
    DirectRoom,
    InvalidConfig,
    InvalidSlice,
    LocalProtocolError,
    NeedsReason,
    NoAnswer,
    NoKeyring,
    NoLanAddress,
    NotAMember,
    NotInProject,
    NotInRepository,
    NotInvited,
    RateLimited,
    RationSpent,
    Refused,
    RelayKeyMismatch,
    RelayUnreachable,
    RemoteProtocolError,
    Reserved,
    SlotExpired,
    SlotNotFound,
    TooLarge,
    Unavailable,
    UnknownFact,
    UnknownMessage,
    UnknownPeer,
    UnknownReservation,
    UnknownRoom,
    UnknownSession,
    UnknownTask,
    UsageError,
    WrongWords,
)
from crosstalk.wire.control import params as p
from crosstalk.wire.control.spec import OpSpec

# Errors several ops share.
_PAIRING = (RelayUnreachable, RelayKeyMismatch, RemoteProtocolError, WrongWords, SlotExpired,
            SlotNotFound, RateLimited)  # fmt: skip
_ADDRESSING = (UnknownPeer, UnknownSession, UnknownRoom, NotAMember, UsageError)
_SLICING = (InvalidSlice, NotInProject, CredentialRefused, TooLarge)
_ROOM = (UnknownRoom, UsageError)
_REPO = (UnknownRoom, NotInRepository, UsageError)

# --- the daemon ----------------------------------------------------------------------------------

STATUS = OpSpec("status", p.NoParams, (), "Who this is, the relay link, the daemon and sessions.")
HEALTH = OpSpec("health", p.NoParams, (), "Each actor's state, restarts and heartbeat age.")
SECURE = OpSpec("secure", p.NoParams, (NoKeyring,), "Move the identity's keys into the OS keyring.")
PRUNE = OpSpec("prune", p.PruneParams, (UsageError,), "Delete held messages older than N days.")

# --- sessions and hooks --------------------------------------------------------------------------

SESSION_REGISTER = OpSpec("session_register", p.SessionRegisterParams, (UsageError,),
                          "Register an agent session (its client, project and inbox).")
SESSION_STATUS = OpSpec("session_status", p.SessionStatusParams, (UsageError,),
                        "Say a session is busy or idle; returns what surfaced for it.")
HOOK_EVENT = OpSpec("hook_event", p.HookEventParams, (*_REPO, InvalidConfig),
                    "One hook event: register, status, working set, notices and edits at once.")
NOTICES = OpSpec("notices", p.NoticesParams, (),
                 "The notices surfaced for a session (or every session).")
NOTICE_SHOWN = OpSpec("notice_shown", p.NoticeShownParams, (),
                      "Mark notices as shown to a session.")

# --- attention -----------------------------------------------------------------------------------

TRUST = OpSpec("trust", p.TrustParams, (UnknownPeer, UnknownRoom, UsageError),
               "Show or set trust levels: the default, per room, per person.")
MUTE = OpSpec("mute", p.MuteParams, (UnknownPeer, UnknownRoom, UsageError),
              "Mute a person, a room or everyone for some minutes; or list mutes.")
ATTENTION = OpSpec("attention", p.NoParams, (),
                   "How often you were reached in the last hour, and what is held.")

# --- pairing, rooms, peers -----------------------------------------------------------------------

LINK_NEW = OpSpec("link_new", p.NoParams, _PAIRING,
                  "Offer this identity to a new machine: an invite, then the link.", stream=True)
LINK_JOIN = OpSpec("link_join", p.LinkJoinParams, (*_PAIRING, AlreadySetUp),
                   "Take an identity offered by another machine of yours.")
ROOM_NEW = OpSpec("room_new", p.RoomNewParams, (*_PAIRING, Unavailable, NoLanAddress),
                  "Start pairing: an invite at once, then who joined.", stream=True)
ROOM_JOIN = OpSpec("room_join", p.RoomJoinParams, _PAIRING, "Pair with the holder of an invite.")
ROOMS = OpSpec("rooms", p.NoParams, (), "Your rooms, their members and pending invitations.")
ROOM_CREATE = OpSpec("room_create", p.CreateParams, (UsageError, RelayUnreachable),
                     "Create a shared room.")
ROOM_INVITE = OpSpec("room_invite", p.InviteParams,
                     (UnknownRoom, UnknownPeer, NotAMember, UsageError, RelayUnreachable),
                     "Invite people you are paired with into a room.")
ROOM_ACCEPT = OpSpec("room_accept", p.RoomParams, (UnknownRoom, NotInvited, RelayUnreachable),
                     "Accept an invitation into a room.")
ROOM_DECLINE = OpSpec("room_decline", p.RoomParams, (UnknownRoom, NotInvited),
                      "Decline an invitation into a room.")
ROOM_LEAVE = OpSpec("room_leave", p.RoomParams, (UnknownRoom, NotAMember, DirectRoom, UsageError),
                    "Leave a shared room.")
ROOM_KICK = OpSpec("room_kick", p.KickParams,
                   (UnknownRoom, UnknownPeer, NotAMember, DirectRoom, UsageError,
                    RelayUnreachable),
                   "Remove a member from a shared room (its key changes).")
PEERS = OpSpec("peers", p.NoParams, (), "You and the people you share rooms with, and sessions.")
RENAME = OpSpec("rename", p.RenameParams, (UnknownPeer, UsageError),
                "Rename a contact, or yourself (`me`).")
COST = OpSpec("cost", p.NoParams, (), "Messages and tokens sent and received, per person.")

# --- messages ------------------------------------------------------------------------------------

SEND = OpSpec("send", p.SendParams,
              (*_ADDRESSING, *_SLICING, UnknownMessage, NeedsReason, RationSpent, Refused),
              "Send a message to a person, one of their sessions or a room.")
ANSWER = OpSpec("answer", p.AnswerParams, (*_ADDRESSING, UnknownMessage, TooLarge),
                "Answer a question someone asked you.")
POST = OpSpec("post", p.PostParams, (TooLarge, UsageError),
              "Post a local message (from a script or a bot) to this identity's sessions.")
SENT = OpSpec("sent", p.SentParams, (UsageError, UnknownMessage),
              "What you sent and how far each message got.")
THREAD = OpSpec("thread", p.ThreadParams, (UsageError, UnknownMessage),
                "A thread's messages and whether it is closed.")
THREAD_CLOSE = OpSpec("thread_close", p.CloseParams, (UsageError, TooLarge, UnknownMessage),
                      "Close a thread with a summary.")
READ = OpSpec("read", p.ReadParams, (UsageError,),
              "The messages waiting (a lease; `ack` marks them read).")
ACK = OpSpec("ack", p.AckParams, (UnknownMessage, UsageError),
             "Mark messages read: those of a `read` lease, or by id.")
READ_SLICE = OpSpec("read_slice", p.SliceParams, (UnknownMessage, Refused, UsageError),
                    "The content of a slice attached to a message.")
ASK = OpSpec("ask", p.AskParams, (*_ADDRESSING, NoAnswer, Refused, TooLarge),
             "Ask a question and wait for the answer.", stream=True)
ASKS = OpSpec("asks", p.NoParams, (), "The questions you are waiting on.")
WAIT = OpSpec("wait", p.WaitParams, (UsageError,), "Wait, bounded, for an arrival.")
WATCH = OpSpec("watch", p.WatchParams, (), "Every arrival, as it comes.", stream=True)
SEARCH = OpSpec("search", p.SearchParams, (UsageError,),
                "Search messages, facts, tasks, decisions and threads you can read.")

# --- edits ---------------------------------------------------------------------------------------

EDITS_TOUCHED = OpSpec("edits_touched", p.TouchedParams, (UsageError, InvalidConfig),
                       "A session wrote these files (shared with rooms that want it).")
EDITS_CHECK = OpSpec("edits_check", p.CheckParams, (UsageError, InvalidConfig),
                     "Who else touched or holds these files, before an edit.")
EDITS = OpSpec("edits", p.EditsParams, (UnknownRoom, UsageError, InvalidConfig),
               "Show or set how a room shares edits, and recent ones.")

# --- room memory ---------------------------------------------------------------------------------

MEMORY_STATE = OpSpec("memory_state", p.Where, _ROOM, "A room's facts, tasks and reservations.")
FACTS = OpSpec("facts", p.ListParams, _ROOM, "A room's facts.")
TASKS = OpSpec("tasks", p.ListParams, _ROOM, "A room's tasks.")
WORKING_SET = OpSpec("working_set", p.WorkingSetParams, _REPO,
                     "What a session should know now: open tasks, facts, reservations.")
FACT_ADD = OpSpec("fact_add", p.FactAddParams, (*_ROOM, TooLarge), "State a fact in a room.")
FACT_CONFIRM = OpSpec("fact_confirm", p.IdParams, (*_ROOM, UnknownFact), "Stand behind a fact.")
FACT_CORRECT = OpSpec("fact_correct", p.FactCorrectParams, (*_ROOM, UnknownFact, NeedsReason),
                      "Correct a fact, saying why.")
FACT_FORGET = OpSpec("fact_forget", p.IdParams, (*_ROOM, UnknownFact), "Retire a fact.")
TASK_ADD = OpSpec("task_add", p.TaskAddParams, (*_ROOM, UnknownPeer, TooLarge),
                  "Add a task to a room's list.")
TASK_CLAIM = OpSpec("task_claim", p.IdParams, (*_ROOM, UnknownTask, ClaimedByOther),
                    "Claim a task (won, or pending until the relay orders it).")
TASK_RELEASE = OpSpec("task_release", p.IdParams, (*_ROOM, UnknownTask),
                      "Give a claimed task back.")
TASK_DROP = OpSpec("task_drop", p.IdParams, (*_ROOM, UnknownTask), "Drop a task from the list.")
TASK_DONE = OpSpec("task_done", p.TaskDoneParams, (*_ROOM, UnknownTask),
                   "Mark a task done, with a note.")
DECIDE = OpSpec("decide", p.DecideParams, (*_REPO, UnknownPeer, TooLarge),
                "Record a decision (and its file in the repository); every member is told.")
DECISIONS = OpSpec("decisions", p.DecisionsParams, _ROOM, "A room's decisions.")
_HOLDING = (*_REPO, Refused, LocalProtocolError)  # over the limit; an outcome that cannot be
RESERVE = OpSpec("reserve", p.ReserveParams, (*_HOLDING, Reserved, UnknownReservation),
                 "Reserve paths in a repository for some minutes.")
RESERVE_RENEW = OpSpec("reserve_renew", p.RenewParams, (*_HOLDING, Reserved, UnknownReservation),
                       "Extend one of your reservations.")
RELEASE = OpSpec("release", p.ReleaseParams, (*_HOLDING, UnknownReservation),
                 "Release reservations, by id or path.")
RESERVATIONS = OpSpec("reservations", p.ReservationsParams, _REPO,
                      "The reservations held in a room.")

# --- the local page ------------------------------------------------------------------------------

UI_OPEN = OpSpec("ui_open", p.NoParams, (Unavailable,), "Start the local page; its URL.")
UI_ROOM = OpSpec("ui_room", p.RoomParams, (UnknownRoom,), "One room as the page shows it.")
UI_MARKS = OpSpec("ui_marks", p.NoParams, (), "What the page marks as new.")

OPS: tuple[OpSpec[Any], ...] = (
    STATUS, HEALTH, SECURE, PRUNE,
    SESSION_REGISTER, SESSION_STATUS, HOOK_EVENT, NOTICES, NOTICE_SHOWN,
    TRUST, MUTE, ATTENTION,
    LINK_NEW, LINK_JOIN, ROOM_NEW, ROOM_JOIN, ROOMS, ROOM_CREATE, ROOM_INVITE, ROOM_ACCEPT,
    ROOM_DECLINE, ROOM_LEAVE, ROOM_KICK, PEERS, RENAME, COST,
    SEND, ANSWER, POST, SENT, THREAD, THREAD_CLOSE, READ, ACK, READ_SLICE, ASK, ASKS, WAIT, WATCH,
    SEARCH,
    EDITS_TOUCHED, EDITS_CHECK, EDITS,
    MEMORY_STATE, FACTS, TASKS, WORKING_SET, FACT_ADD, FACT_CONFIRM, FACT_CORRECT, FACT_FORGET,
    TASK_ADD, TASK_CLAIM, TASK_RELEASE, TASK_DROP, TASK_DONE, DECIDE, DECISIONS,
    RESERVE, RESERVE_RENEW, RELEASE, RESERVATIONS,
    UI_OPEN, UI_ROOM, UI_MARKS,
)  # fmt: skip
"""Every op, in the order the docs list them."""

BY_NAME: dict[str, OpSpec[Any]] = {spec.name: spec for spec in OPS}
