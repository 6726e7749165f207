"""The replies of the daemon's own ops: identity, retention, attention, sessions, the page.

Each is the model of one op's reply in the op table (:mod:`crosstalk.wire.control.table`),
or a view nested in one; the daemon unstructures it through the one converter.
"""

from __future__ import annotations

from typing import Any

import attrs


@attrs.frozen
class PinView:
    person: str
    room: str
    level: str


@attrs.frozen
class TrustReply:
    default: str
    rooms: dict[str, str]
    people: dict[str, str]
    pins: list[PinView]
    local: str
    explain: str | None = None  # for `trust WHO`: their level and why (outside any room)


@attrs.frozen
class MuteView:
    who: str
    until: float


@attrs.frozen
class MuteReply:
    muted: list[str]  # every mute in force, by our names
    until: float | None  # when ``who`` stops being held (by its mute or one covering it)
    by: list[str] = attrs.Factory(list)  # the mutes holding ``who``: its own, ``everyone``
    mutes: list[MuteView] = attrs.Factory(list)  # every mute in force, with its end


@attrs.frozen
class AttentionReply:
    reached_last_hour: int
    held: int
    by_source: dict[str, int]


@attrs.frozen
class SessionView:
    name: str
    client: str
    project: str
    status: str
    transcript_path: str | None = None


@attrs.frozen
class NoticeView:
    id: str
    sender: str
    label: str
    session: str | None
    room: str | None
    from_session: str | None
    intent: str
    kind: str
    decision: str
    due: str
    created_at: float
    surfaced_at: float | None
    batch: str | None
    #: The sender's words, only when asked for and the gate decided ``deliver``.
    words: str | None = None


@attrs.frozen
class NoticesReply:
    notices: list[NoticeView]


@attrs.frozen
class NoticeShownReply:
    shown: int


@attrs.frozen
class SecureReply:
    storage: str


@attrs.frozen
class PruneReply:
    older_than_days: float
    removed: dict[str, int]


@attrs.frozen
class UiOpenReply:
    url: str


@attrs.frozen
class MarksReply:
    marks: dict[str, str]


@attrs.frozen
class ActorRow:
    name: str
    state: str
    restarts: int
    last_error: str | None
    beat_age_s: float
    inbox: int


@attrs.frozen
class HealthReply:
    actors: list[ActorRow]


@attrs.frozen
class Surfaced:
    """One batch released to a session: one notice's worth from one sender (no peer words)."""

    batch: str
    sender: str
    label: str
    sessions: tuple[str, ...]  # the sender's sessions, as they named them
    items: tuple[str, ...]  # message ids, oldest first
    words: bool  # some item's words may be quoted into the turn (the level was deliver)


@attrs.frozen
class SessionStatusReply:
    name: str
    status: str
    surfaced: list[Surfaced]


@attrs.frozen
class EditWarning:
    """What ``edits_check`` says about an edit about to happen (the hook renders it)."""

    text: str | None
    #: ``allow`` (text, if any, is a warning), ``ask`` or ``deny``.
    decision: str = "allow"


@attrs.frozen
class HookEventReply:
    session: SessionView
    #: The working set's text, when asked for (None: this daemon has no memory feature).
    working_set: str | None = None
    notices: list[NoticeView] | None = None
    #: For ``editing``: None when there is nothing to say or no edits feature.
    edit_warning: EditWarning | None = None


@attrs.frozen
class SliceRef:
    index: int
    kind: str
    label: str
    bytes: int


@attrs.frozen
class ConversationEntry:
    """One message in a room, ours or theirs; every string in it is the sender's, untrusted."""

    id: str
    mine: bool
    sender: str
    from_label: str
    from_session: str | None
    text: str
    intent: str
    kind: str
    thread: str | None
    reply_to: str | None
    correlation: str | None
    ts: float
    slices: list[SliceRef]
    #: For ours: queued, sent, delivered, read or refused; for theirs: unread or read.
    state: str
    reason: str | None = None


@attrs.frozen
class ClaimEvent:
    seq: int
    outcome: str
    holder: str | None


@attrs.frozen
class PageRoomReply:
    """One room as the page shows it: its conversation and its task claims."""

    room: str
    messages: list[ConversationEntry]
    claims: list[ClaimEvent]


@attrs.frozen
class RelayView:
    url: str | None
    connected: bool
    state: str
    last_error: str | None
    attempts: int = 0
    losses: int = 0
    lost_ago_s: float | None = None
    last_loss: str | None = None
    reconnect_s: float | None = None


@attrs.frozen
class LoopView:
    """How late the daemon's event loop has run (the supervisor's pulse): the worst since it
    started, when (Unix time: unlike an age, two answers agree), and the pulse's period, the
    measurement's resolution."""

    worst_lag_s: float
    worst_lag_at: float | None
    resolution_s: float


@attrs.frozen
class LatencyStat:
    """One latency over the window: how many, p50 and p99 in seconds (None with none)."""

    count: int
    p50_s: float | None
    p99_s: float | None


@attrs.frozen
class LatencyView:
    """p50/p99 over the last ``window_s`` seconds: ``send_posted`` from a message committed to
    the outbox to the relay's ``posted``; ``hook`` the control op ``hook_event``, request to
    reply."""

    window_s: float
    send_posted: LatencyStat
    hook: LatencyStat


@attrs.frozen
class OwnSession:
    name: str
    client: str
    project: str
    status: str
    last_seen: float


@attrs.frozen
class StatusReply:
    pid: int
    version: str
    home: str
    uptime_s: float
    label: str | None
    fingerprint: str | None
    relay: RelayView
    loop: LoopView
    latency: LatencyView
    sessions: list[OwnSession] = attrs.Factory(list)  # this identity's agent sessions here
    # What each feature shows, by feature name (an attrs value or JSON data per feature).
    features: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class LinkNotStarted:
    """The relay link's part of a starting daemon's ``status``: not started yet."""

    url: str | None = None
    connected: bool = False
    state: str = "not started"
    last_error: str | None = None


@attrs.frozen
class StartingStatus:
    """``status`` while the daemon starts: who it is as a process, and what is still starting."""

    pid: int
    version: str
    home: str
    uptime_s: float
    starting: list[str]
    relay: LinkNotStarted = LinkNotStarted()
