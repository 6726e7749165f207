"""The replies of the message ops: send, answer, post, sent, read, ack, slices, asks, threads.

Each is the model of one op's reply in the op table (:mod:`crosstalk.wire.control.table`),
or a view nested in one; the daemon unstructures it through the one converter.
"""

from __future__ import annotations

import attrs

from crosstalk.wire.converter import rename_fields


@attrs.frozen
class AsksReply:
    waiting: list[str]  # correlations of asks still waiting for an answer
    watching: int = 0  # `watch` streams open now (a script can wait for its watcher to be on)


@attrs.frozen
class WaitReply:
    arrived: int


@attrs.frozen
class SentView:
    id: str
    to: str
    kind: str
    state: str  # crosstalk.core.delivery.DeliveryState
    ts: float
    reason: str | None = None  # why it was refused (state "refused")
    by: str | None = None  # who refused it: a recipient's name; None for the relay
    text: str = ""  # the start of what we wrote


@attrs.frozen
class SentReply:
    sent: list[SentView]
    next: str | None = None  # pass as ``before`` for the next (older) page; None: no more


@attrs.frozen
class PostReply:
    posted_as: str
    id: str


@attrs.frozen
class SendReply:
    id: str
    state: str
    to: list[str]
    truncated: list[int] = attrs.Factory(list)  # slices cut to their cap, by index


@attrs.frozen
class SliceView:
    index: int
    kind: str
    label: str
    bytes: int
    truncated: bool = False


@attrs.frozen
class MessageView:
    id: str
    from_: str
    session: str | None
    room: str
    intent: str
    kind: str
    text: str
    thread: str | None
    reply_to: str | None
    correlation: str | None
    ts: float
    slices: list[SliceView]
    short: str = ""  # the id as human output shows it; ``answer`` and ``slice`` take it


@attrs.frozen
class ReadReply:
    messages: list[MessageView]
    lease: str | None  # acknowledge it once the messages are in front of the reader


@attrs.frozen
class AckReply:
    acked: int  # messages that became read now (already-read ones are not counted)


@attrs.frozen
class SliceReply:
    kind: str
    label: str
    bytes: int
    sha256: str
    content: str
    truncated: bool


@attrs.frozen
class AskReply:
    answer: str
    from_: str
    id: str


@attrs.frozen
class MutualWait:
    waiting_on_each_other: str


@attrs.frozen
class Watching:
    """A watch stream's first line: it is on, and where it starts."""

    event: str
    cursor: int  # the newest message held when it started; arrivals come after it


@attrs.frozen
class Arrival:
    """One held message as ``read --json`` shows it (its fields are read's), and its cursor."""

    event: str
    id: str
    from_: str
    session: str | None
    room: str
    intent: str
    kind: str
    text: str | None = None
    cursor: int = 0


@attrs.frozen
class ThreadMessage:
    id: str
    from_: str  # our name for the sender; "me" for what we sent
    to: str | None  # whom we sent it to (our messages only)
    kind: str
    text: str
    reply_to: str | None
    ts: float


@attrs.frozen
class ThreadView:
    thread: str
    messages: list[ThreadMessage]
    closed: bool
    summary: str | None
    closed_by: str | None = None


@attrs.frozen
class CloseReply(ThreadView):
    told: list[str] = attrs.Factory(list)  # the rooms the summary was posted to


@attrs.frozen
class Hit:
    """One result, as ``search`` returns it (CLI.md): ``from_`` travels as ``from``."""

    kind: str
    id: str
    room: str
    from_: str
    snippet: str
    ts: float


@attrs.frozen
class SearchReply:
    results: list[Hit]
    # Some facts, tasks or decisions changed lately were not searched: indexing them needs a
    # write, and the disk refused it (what is indexed was searched all the same).
    incomplete: bool = False


# "from" is a keyword in Python: the fields are ``from_`` and travel as "from".
for _cls in (MessageView, AskReply, Arrival, ThreadMessage, Hit):
    rename_fields(_cls, from_="from")
