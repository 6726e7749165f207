"""The one table of control ops: every op the daemon serves, as an :class:`OpSpec` (the
room-memory ops' specs are written in :mod:`.table_memory`; :data:`OPS` lists them all).

Features register a handler against a spec (``op(SEND, handler)``); the control server
dispatches by it; ``docs/control.md`` is written from it (``python -m crosstalk.wire.control.docs
--write docs/control.md``). An op that is not in :data:`OPS` cannot be served, and a test checks
that every op here is served by exactly one feature.
"""

from __future__ import annotations

from typing import Any

from crosstalk import errors as e
from crosstalk.wire.control import params as p
from crosstalk.wire.control.replies import daemon as rd
from crosstalk.wire.control.replies import memory as rmem
from crosstalk.wire.control.replies import messages as rm
from crosstalk.wire.control.replies import rooms as rr
from crosstalk.wire.control.spec import OpSpec
from crosstalk.wire.control.table_memory import (
    DECIDE,
    DECISIONS,
    FACT_ADD,
    FACT_CONFIRM,
    FACT_CORRECT,
    FACT_FORGET,
    FACTS,
    MEMORY_STATE,
    RELEASE,
    RESERVATIONS,
    RESERVE,
    RESERVE_RENEW,
    TASK_ADD,
    TASK_CLAIM,
    TASK_DONE,
    TASK_DROP,
    TASK_RELEASE,
    TASKS,
    WORKING_SET,
)

# Errors several ops share.
_PAIRING = (e.RelayUnreachable, e.RelayKeyMismatch, e.RemoteProtocolError, e.WrongWords,
            e.SlotExpired, e.SlotNotFound, e.RateLimited)  # fmt: skip
_ADDRESSING = (e.UnknownPeer, e.UnknownSession, e.UnknownRoom, e.NotAMember, e.UsageError)
_SLICING = (e.InvalidSlice, e.NotInProject, e.CredentialRefused, e.TooLarge)
_REPO = (e.UnknownRoom, e.NotInRepository, e.UsageError)

# --- the daemon ----------------------------------------------------------------------------------

STATUS = OpSpec(
    "status",
    p.NoParams,
    (),
    "Who this is, the relay link, the daemon and sessions.",
    reply=(rd.StatusReply, rd.StartingStatus),  # the gate's, while the daemon starts
)
HEALTH = OpSpec(
    "health",
    p.NoParams,
    (),
    "Each actor's state, restarts and heartbeat age.",
    reply=rd.HealthReply,
)
SECURE = OpSpec(
    "secure",
    p.NoParams,
    (e.NoKeyring,),
    "Move the identity's keys into the OS keyring.",
    reply=rd.SecureReply,
)
PRUNE = OpSpec(
    "prune",
    p.PruneParams,
    (e.UsageError,),
    "Delete held messages older than N days.",
    reply=rd.PruneReply,
)

# --- sessions and hooks --------------------------------------------------------------------------

SESSION_REGISTER = OpSpec(
    "session_register",
    p.SessionRegisterParams,
    (e.UsageError,),
    "Register an agent session (its client, project and inbox).",
    reply=rd.SessionView,
)
SESSION_STATUS = OpSpec(
    "session_status",
    p.SessionStatusParams,
    (e.UsageError,),
    "Say a session is busy or idle; returns what surfaced for it.",
    reply=rd.SessionStatusReply,
)
HOOK_EVENT = OpSpec(
    "hook_event",
    p.HookEventParams,
    (*_REPO, e.InvalidConfig),
    "One hook event: register, status, working set, notices and edits at once.",
    reply=rd.HookEventReply,
)
NOTICES = OpSpec(
    "notices",
    p.NoticesParams,
    (),
    "The notices surfaced for a session (or every session).",
    reply=rd.NoticesReply,
)
NOTICE_SHOWN = OpSpec(
    "notice_shown",
    p.NoticeShownParams,
    (),
    "Mark notices as shown to a session.",
    reply=rd.NoticeShownReply,
)

# --- attention -----------------------------------------------------------------------------------

TRUST = OpSpec(
    "trust",
    p.TrustParams,
    (e.UnknownPeer, e.UnknownRoom, e.UsageError),
    "Show or set trust levels: the default, per room, per person.",
    reply=rd.TrustReply,
)
MUTE = OpSpec(
    "mute",
    p.MuteParams,
    (e.UnknownPeer, e.UnknownRoom, e.UsageError),
    "Mute a person, a room or everyone for some minutes; or list mutes.",
    reply=rd.MuteReply,
)
ATTENTION = OpSpec(
    "attention",
    p.NoParams,
    (),
    "How often you were reached in the last hour, and what is held.",
    reply=rd.AttentionReply,
)

# --- pairing, rooms, peers -----------------------------------------------------------------------

LINK_NEW = OpSpec(
    "link_new",
    p.NoParams,
    _PAIRING,
    "Offer this identity to a new machine: an invite, then the link.",
    reply=(rr.InviteLine, rr.LinkedLine),
    stream=True,
)
LINK_JOIN = OpSpec(
    "link_join",
    p.LinkJoinParams,
    (*_PAIRING, e.AlreadySetUp),
    "Take an identity offered by another machine of yours.",
    reply=rr.LinkedLine,
)
ROOM_NEW = OpSpec(
    "room_new",
    p.RoomNewParams,
    (*_PAIRING, e.Unavailable, e.NoLanAddress, e.RelayInUse),
    "Start pairing: an invite at once, then who joined.",
    reply=(rr.InviteLine, rr.JoinedLine),
    stream=True,
)
ROOM_JOIN = OpSpec(
    "room_join",
    p.RoomJoinParams,
    (*_PAIRING, e.RelayInUse, e.NotInvited),
    "Pair with the holder of an invite.",
    reply=rr.JoinedLine,
)
ROOMS = OpSpec(
    "rooms",
    p.NoParams,
    (),
    "Your rooms, their members and pending invitations.",
    reply=rr.RoomsReply,
)
ROOM_CREATE = OpSpec(
    "room_create",
    p.CreateParams,
    (e.UsageError, e.RelayUnreachable, e.UnknownRoom, e.NotAMember),
    "Create a shared room.",
    reply=rr.RoomReply,
)
ROOM_INVITE = OpSpec(
    "room_invite",
    p.InviteParams,
    (e.UnknownRoom, e.UnknownPeer, e.NotAMember, e.UsageError, e.RelayUnreachable),
    "Invite people you are paired with into a room.",
    reply=rr.InviteReply,
)
ROOM_ACCEPT = OpSpec(
    "room_accept",
    p.RoomParams,
    (e.UnknownRoom, e.NotInvited, e.RelayUnreachable, e.NotAMember),
    "Accept an invitation into a room.",
    reply=rr.RoomReply,
)
ROOM_DECLINE = OpSpec(
    "room_decline",
    p.RoomParams,
    (e.UnknownRoom, e.NotInvited),
    "Decline an invitation into a room.",
    reply=rr.RoomReply,
)
ROOM_LEAVE = OpSpec(
    "room_leave",
    p.RoomParams,
    (e.UnknownRoom, e.NotAMember, e.DirectRoom, e.UsageError),
    "Leave a shared room.",
    reply=rr.RoomReply,
)
ROOM_KICK = OpSpec(
    "room_kick",
    p.KickParams,
    (e.UnknownRoom, e.UnknownPeer, e.NotAMember, e.DirectRoom, e.UsageError, e.RelayUnreachable),
    "Remove a member from a shared room (its key changes).",
    reply=rr.KickReply,
)
PEERS = OpSpec(
    "peers",
    p.NoParams,
    (),
    "You and the people you share rooms with, and sessions.",
    reply=rr.PeersReply,
)
RENAME = OpSpec(
    "rename",
    p.RenameParams,
    (e.UnknownPeer, e.UsageError),
    "Rename a contact, or yourself (`me`).",
    reply=rr.RenameReply,
)
COST = OpSpec(
    "cost", p.NoParams, (), "Messages and tokens sent and received, per person.", reply=rr.CostReply
)

# --- messages ------------------------------------------------------------------------------------

SEND = OpSpec(
    "send",
    p.SendParams,
    (*_ADDRESSING, *_SLICING, e.UnknownMessage, e.NeedsReason, e.RationSpent, e.Refused),
    "Send a message to a person, one of their sessions or a room.",
    reply=rm.SendReply,
)
ANSWER = OpSpec(
    "answer",
    p.AnswerParams,
    (*_ADDRESSING, e.UnknownMessage, e.TooLarge),
    "Answer a question someone asked you.",
    reply=rm.SendReply,
)
POST = OpSpec(
    "post",
    p.PostParams,
    (e.TooLarge, e.UsageError),
    "Post a local message (from a script or a bot) to this identity's sessions.",
    reply=rm.PostReply,
)
SENT = OpSpec(
    "sent",
    p.SentParams,
    (e.UsageError, e.UnknownMessage),
    "What you sent and how far each message got.",
    reply=rm.SentReply,
)
THREAD = OpSpec(
    "thread",
    p.ThreadParams,
    (e.UsageError, e.UnknownMessage),
    "A thread's messages and whether it is closed.",
    reply=rm.ThreadView,
)
THREAD_CLOSE = OpSpec(
    "thread_close",
    p.CloseParams,
    (e.UsageError, e.TooLarge, e.UnknownMessage, e.UnknownRoom, e.NotAMember),
    "Close a thread with a summary.",
    reply=rm.CloseReply,
)
READ = OpSpec(
    "read",
    p.ReadParams,
    (e.UsageError,),
    "The messages waiting (a lease; `ack` marks them read).",
    reply=rm.ReadReply,
)
ACK = OpSpec(
    "ack",
    p.AckParams,
    (e.UnknownMessage, e.UsageError),
    "Mark messages read: those of a `read` lease, or by id.",
    reply=rm.AckReply,
)
READ_SLICE = OpSpec(
    "read_slice",
    p.SliceParams,
    (e.UnknownMessage, e.Refused, e.UsageError),
    "The content of a slice attached to a message.",
    reply=rm.SliceReply,
)
ASK = OpSpec(
    "ask",
    p.AskParams,
    (*_ADDRESSING, e.NoAnswer, e.Refused, e.TooLarge),
    "Ask a question and wait for the answer.",
    reply=(rm.AskReply, rm.MutualWait),
    stream=True,
)
ASKS = OpSpec("asks", p.NoParams, (), "The questions you are waiting on.", reply=rm.AsksReply)
WAIT = OpSpec(
    "wait", p.WaitParams, (e.UsageError,), "Wait, bounded, for an arrival.", reply=rm.WaitReply
)
WATCH = OpSpec(
    "watch",
    p.WatchParams,
    (),
    "Every arrival, as it comes.",
    reply=(rm.Watching, rm.Arrival),
    stream=True,
)
SEARCH = OpSpec(
    "search",
    p.SearchParams,
    (e.UsageError,),
    "Search messages, facts, tasks, decisions and threads you can read.",
    reply=rm.SearchReply,
)

# --- edits ---------------------------------------------------------------------------------------

EDITS_TOUCHED = OpSpec(
    "edits_touched",
    p.TouchedParams,
    (e.UsageError, e.InvalidConfig),
    "A session wrote these files (shared with rooms that want it).",
    reply=rmem.TouchedReply,
)
EDITS_CHECK = OpSpec(
    "edits_check",
    p.CheckParams,
    (e.UsageError, e.InvalidConfig),
    "Who else touched or holds these files, before an edit.",
    reply=rmem.CheckReply,
)
EDITS = OpSpec(
    "edits",
    p.EditsParams,
    (e.UnknownRoom, e.UsageError, e.InvalidConfig),
    "Show or set how a room shares edits, and recent ones.",
    reply=rmem.EditsReply,
)

# --- the local page ------------------------------------------------------------------------------

UI_OPEN = OpSpec(
    "ui_open", p.NoParams, (e.Unavailable,), "Start the local page; its URL.", reply=rd.UiOpenReply
)
UI_ROOM = OpSpec(
    "ui_room",
    p.RoomParams,
    (e.UnknownRoom,),
    "One room as the page shows it.",
    reply=rd.PageRoomReply,
)
UI_MARKS = OpSpec("ui_marks", p.NoParams, (), "What the page marks as new.", reply=rd.MarksReply)

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
