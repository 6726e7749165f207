"""The parameters of every control op, one attrs model per shape (:mod:`.table` names which op
takes which).

A field the MCP server fills from where its caller runs (the session's name, its working
directory, its transcript) carries :data:`CALLER` in its metadata: the tool schemas leave it out,
and the server adds it to every call. ``peer_cwd`` is set by the control server itself.
"""

from __future__ import annotations

from typing import Any

import attrs

from crosstalk.wire.converter import rename_fields
from crosstalk.wire.reservations import DEFAULT_MINUTES

CALLER = "caller"
"""Field metadata key: the MCP server fills this field, the tool's caller never does."""
SEARCH_LIMIT = 20  # results per search unless asked otherwise


def caller(default: Any = None) -> Any:
    """A field filled from where the caller runs, not by what the caller typed."""
    return attrs.field(default=default, metadata={CALLER: True})


@attrs.frozen
class NoParams:
    """An op that takes no parameters."""


@attrs.frozen
class RoomParams:
    room: str


# --- sessions and hooks --------------------------------------------------------------------------


@attrs.frozen
class SessionRegisterParams:
    name: str
    client: str = "unknown"
    project: str = ""
    inbox_socket: str | None = None
    #: The client's transcript file, from the hook payload (for ``--slice turns``).
    transcript_path: str | None = None


@attrs.frozen
class SessionStatusParams:
    name: str
    status: str


@attrs.frozen
class NoticesParams:
    session: str | None = caller()
    pending: bool = False  # only surfaced notices no session has shown yet
    #: Include the words of ``deliver``-level notices (the pull hook quotes them).
    words: bool = False


@attrs.frozen
class HookEventParams:
    """``session_register``'s fields, then what else the event needs."""

    name: str
    client: str = "unknown"
    project: str = ""
    inbox_socket: str | None = None
    transcript_path: str | None = None
    #: ``busy`` (a prompt) or ``idle`` (a stop), as ``session_status`` takes it; None: neither.
    status: str | None = None
    #: Ask for the working set (``working_set {session, cwd}``).
    working_set: bool = False
    cwd: str | None = caller()
    #: Ask for the pending notices with words (``notices {session, pending, words}``).
    notices: bool = False
    #: Files a tool call of the session wrote, as the client named them (relative to ``cwd``
    #: or absolute): ``edits_touched {session, cwd, paths}``.
    edited: list[str] = attrs.Factory(list)
    #: Files a tool call is about to write: ``edits_check {session, cwd, paths}`` answers.
    editing: list[str] = attrs.Factory(list)


@attrs.frozen
class NoticeShownParams:
    session: str
    ids: list[str]


# --- attention -----------------------------------------------------------------------------------


@attrs.frozen
class TrustParams:
    who: str | None = None
    level: str | None = None
    room: str | None = None


@attrs.frozen
class MuteParams:
    """``who`` for ``minutes`` (60 when not given); no ``who`` and no ``minutes``: only list.
    ``who`` may be a person, a room, or ``everyone``/``all``; minutes without ``who`` mute
    everyone (``crosstalk mute 30``)."""

    who: str | None = None
    minutes: float | None = None


# --- pairing, rooms, peers -----------------------------------------------------------------------


@attrs.frozen
class LinkJoinParams:
    code: str


@attrs.frozen
class RoomNewParams:
    label: str | None = None
    agent: bool = False
    host: bool = False  # run a relay others on this network can reach
    public: bool = False  # and put a Cloudflare quick tunnel in front of it


@attrs.frozen
class RoomJoinParams:
    code: str
    label: str | None = None
    agent: bool = False


@attrs.frozen
class CreateParams:
    name: str


@attrs.frozen
class InviteParams:
    room: str
    peers: list[str]


@attrs.frozen
class KickParams:
    room: str
    peer: str


@attrs.frozen
class RenameParams:
    old: str
    new: str


# --- messages ------------------------------------------------------------------------------------


@attrs.frozen
class SendParams:
    to: str
    text: str
    intent: str = "fyi"
    kind: str = "message"  # or "handoff" (a work item, usually with slices)
    thread: str | None = None
    reply_to: str | None = None
    session: str | None = caller()  # the sending session, shown to the recipient
    slices: list[str] = attrs.Factory(list)  # diff[:REF] | file:PATH | turns[:N] | note:TEXT
    cwd: str | None = caller()  # where file and diff slices are taken from
    # Where the caller's process really runs (set by the control server from the kernel, never
    # by the caller): its project is one a person at their own terminal may slice from.
    peer_cwd: str | None = caller()
    transcript: str | None = caller()  # for turns slices
    unprompted: bool = False  # self-initiated: rationed, and must say why
    because: str | None = None


@attrs.frozen
class AnswerParams:
    to: str
    correlation: str
    text: str
    session: str | None = caller()


@attrs.frozen
class SentParams:
    limit: int = 50  # at most MAX_SENT_PAGE; page on with ``before``
    since: float | None = None  # only what was sent at or after this (wall-clock seconds)
    before: str | None = None  # only what was sent before this message: a page's ``next``


@attrs.frozen
class PostParams:
    text: str
    intent: str = "fyi"
    source: str = "local"


@attrs.frozen
class ThreadParams:
    id: str


@attrs.frozen
class CloseParams:
    id: str
    summary: str


@attrs.frozen
class ReadParams:
    all: bool = False
    session: str | None = caller()


@attrs.frozen
class AckParams:
    lease: str | None = None
    ids: list[str] = attrs.Factory(list)


@attrs.frozen
class SliceParams:
    id: str
    index: int = 0


@attrs.frozen
class AskParams:
    to: str
    text: str
    timeout: float = 300.0
    session: str | None = caller()


@attrs.frozen
class WaitParams:
    timeout: float = 60.0


@attrs.frozen
class WatchParams:
    text: bool = False
    after: int | None = None  # resume after this cursor (a line's ``cursor``), after a restart


@attrs.frozen
class SearchParams:
    query: str
    room: str | None = None
    from_: str | None = None  # travels as "from"
    kind: str | None = None
    since: float | None = None  # days
    limit: int = SEARCH_LIMIT


rename_fields(SearchParams, structure=True, from_="from")


@attrs.frozen
class PruneParams:
    older_than_days: float | None = None


# --- edits ---------------------------------------------------------------------------------------


@attrs.frozen
class TouchedParams:
    session: str
    cwd: str | None = caller()
    paths: list[str] = attrs.Factory(list)
    note: str | None = None


@attrs.frozen
class CheckParams:
    session: str
    cwd: str | None = caller()
    paths: list[str] = attrs.Factory(list)


@attrs.frozen
class EditsParams:
    room: str | None = None
    share: bool | None = None
    on_reserved: str | None = None
    window_minutes: float | None = None


# --- room memory ---------------------------------------------------------------------------------


@attrs.frozen
class DecisionsParams:
    room: str | None = None
    cwd: str | None = caller()  # the CLI sends it with every memory command; the list is per room


@attrs.frozen
class ReserveParams:
    paths: list[str]
    minutes: int = DEFAULT_MINUTES
    shared: bool = False
    reason: str = ""
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class RenewParams:
    id: str
    minutes: int = DEFAULT_MINUTES
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class ReleaseParams:
    """Ids or paths (globs); none: all of yours in this repository, or everywhere outside one."""

    targets: list[str] = attrs.Factory(list)
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class ReservationsParams:
    room: str | None = None
    cwd: str | None = caller()
    # Apply our own sequenced ops first (a listing shows them). The hooks' pre-edit check, on
    # every edit, asks for others' only and skips the store writes that takes.
    catch_up: bool = True


@attrs.frozen
class Where:
    """Which room: ``room`` (name or id), else the project bound at ``cwd``, else the only one."""

    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class ListParams:
    room: str | None = None
    cwd: str | None = caller()
    all: bool = False


@attrs.frozen
class FactAddParams:
    text: str
    tags: list[str] = attrs.Factory(list)
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class IdParams:
    id: str
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class FactCorrectParams:
    id: str
    because: str
    text: str | None = None
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class TaskAddParams:
    text: str
    person: str | None = None  # whom it is for: a name, or None for anyone
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class TaskDoneParams:
    id: str
    note: str = ""
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class DecideParams:
    text: str
    why: str = ""
    repo: str | None = None
    tell: str | None = None
    room: str | None = None
    cwd: str | None = caller()


@attrs.frozen
class WorkingSetParams:
    repo: str | None = None
    session: str | None = caller()
    cwd: str | None = caller()
