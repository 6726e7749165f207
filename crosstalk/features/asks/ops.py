"""``ask`` (a question that waits for its answer), ``wait`` and ``watch`` (arrivals as they come).

A :class:`Mailroom` listens to what every room applies. It hands an answer to the ask waiting
on its correlation, wakes ``wait`` callers, and feeds each ``watch`` stream one line per
arrival. An ask is a stream op, so a client that hangs up cancels it; whatever ends it (answer,
refusal, timeout, cancel), its row and waiter are gone afterwards: nothing is left dangling.
When someone asks us while we are ourselves waiting on them, both sides are told.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
from collections import OrderedDict
from collections.abc import AsyncGenerator
from typing import TypeVar

import nacl.utils
import trio

from crosstalk.core.room import Applied
from crosstalk.core.triage import Kind
from crosstalk.errors import CrosstalkError, NoAnswer, Refused, UsageError
from crosstalk.features.feature import Plugs, op, stream_op

# Asks send as messages do, so they ask for what sending asks for.
from crosstalk.features.messages.ops import Host, deliver, resolve
from crosstalk.features.read.ops import view_of
from crosstalk.store.asks import apply_ask_ended
from crosstalk.store.messages import HeldRow, held_after, held_with_ids, last_cursor
from crosstalk.store.rooms import contact_named, find_contact
from crosstalk.wire.control.params import AskParams, NoParams, SendParams, WaitParams, WatchParams
from crosstalk.wire.control.replies.messages import (
    Arrival,
    AskReply,
    AsksReply,
    MutualWait,
    WaitReply,
    Watching,
)
from crosstalk.wire.control.table import ASK, ASKS, WAIT, WATCH
from crosstalk.wire.room_ops import AskEnded, MessageOp

log = logging.getLogger(__name__)
T = TypeVar("T")

#: What ends a waiting ask: its answer, or the asked side's automatic refusal.
_REPLIES = (Kind.ANSWER, Kind.REFUSAL)
MAX_WAIT = 600.0
ENDED_WAIT = 5.0
WATCH_BUFFER = 1000
BACKLOG_PAGE = 500  # a resumed watch reads what it missed this many messages at a time
SEEN_LIMIT = 4096


class Mailroom:
    """Who is waiting for what; fed by the rooms after each commit."""

    def __init__(self, daemon: Host) -> None:
        self._daemon = daemon
        self.asks: dict[str, tuple[str, trio.MemorySendChannel[MessageOp]]] = {}
        self.arrived = trio.Event()
        # Each watch stream is told the ids of each batch that arrived, and reads them as held.
        self.watchers: set[trio.MemorySendChannel[list[str]]] = set()

    async def applied(self, applied: list[Applied]) -> None:
        messages = [a for a in applied if isinstance(a.op, MessageOp)]
        if not messages:
            return
        labels: dict[str, str] = {}
        if self.asks and any(_asks(a) for a in messages):
            # Names only for a mutual wait (an ask from someone we are waiting on). Most
            # batches have none: no read.
            senders = {a.sender for a in messages}
            labels = await self._daemon.store.read(lambda c: _labels(c, senders))
        for entry in messages:
            op = entry.op
            assert isinstance(op, MessageOp)
            label = labels.get(entry.sender) or entry.sender
            if entry.sender == self._daemon.keys.fingerprint:
                label = "me"  # another of our own sessions (me/SESSION)
            if op.kind in _REPLIES and op.correlation in self.asks:
                _, waiter = self.asks[op.correlation]
                _tell(waiter, op)
            if op.kind is Kind.ASK:
                await self._mutual(entry.sender, label)
        ids = [entry.op_id for entry in messages]
        for watcher in list(self.watchers):
            _tell(watcher, ids)
        self.arrived.set()
        self.arrived = trio.Event()

    async def _mutual(self, sender: str, label: str) -> None:
        """They ask us while we wait on them: tell our waiting ask, and tell them."""
        for asked, waiter in self.asks.values():
            if asked == sender:
                waiter_note = MessageOp(
                    msg_id="",
                    text="",
                    kind=Kind.NOTICE,
                    correlation="mutual-wait",
                    from_label=label,
                )
                _tell(waiter, waiter_note)
                note = SendParams(
                    to=label,
                    intent="blocking",
                    text="You are both waiting on each other's answer; one of you answer first.",
                )
                await deliver(self._daemon, note, kind=Kind.NOTICE)
                return


def _asks(entry: Applied) -> bool:
    return isinstance(entry.op, MessageOp) and entry.op.kind is Kind.ASK


def _labels(conn: sqlite3.Connection, senders: set[str]) -> dict[str, str]:
    """Our names for the senders (their fingerprints when we have no name for them)."""
    found = {fp: find_contact(conn, fp) for fp in senders}
    return {fp: contact.label if contact else fp for fp, contact in found.items()}


def _tell(channel: trio.MemorySendChannel[T], value: T) -> None:
    try:
        channel.send_nowait(value)
    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
        log.info("a waiter missed an arrival (it left, or its buffer is full)")


async def ask(
    daemon: Host, mailroom: Mailroom, params: AskParams
) -> AsyncGenerator[AskReply | MutualWait, None]:
    """Ask a person and wait for the answer; whatever ends the ask, nothing is left behind."""
    if not 0 < params.timeout <= 24 * 3600:
        raise UsageError("An ask waits between 0 and 86400 seconds.")
    correlation = nacl.utils.random(16).hex()
    send, receive = trio.open_memory_channel[MessageOp](8)
    asked_in: str | None = None  # the room the ask went to, once it was sent
    answered = False
    async with receive:
        try:
            asked = await daemon.store.read(lambda c: _recipient(c, params.to))
            mailroom.asks[correlation] = (asked, send)
            asked_in = await _send_ask(daemon, params, correlation)
            with trio.move_on_after(params.timeout):
                async for reply in receive:
                    if reply.correlation == "mutual-wait":
                        yield MutualWait(reply.from_label)
                        continue
                    answered = True  # an answer or a refusal: the ask is over for both
                    yield await _answer(daemon, params.to, asked, reply)
                    return
            raise NoAnswer(f"No answer from {params.to} within {params.timeout:g} s.")
        finally:
            mailroom.asks.pop(correlation, None)
            if asked_in is not None and not answered:
                await _tell_ended(daemon, asked_in, correlation)


async def _send_ask(daemon: Host, params: AskParams, correlation: str) -> str:
    """Send the question under ``correlation``; the room it went to."""
    question = SendParams(
        to=params.to, text=params.text, intent="question", session=params.session
    )
    await deliver(daemon, question, kind=Kind.ASK, correlation=correlation)
    return (await daemon.store.read(lambda c: resolve(c, params.to))).room_id


async def _answer(daemon: Host, to: str, asked: str, reply: MessageOp) -> AskReply:
    """What the asker hears: the answer, or ``Refused`` when the receiver refused the ask."""
    if reply.refused:
        raise Refused(f"{to} does not take questions from you right now.")
    label = (await daemon.store.read(lambda c: _labels(c, {asked})))[asked]
    return AskReply(answer=reply.text, from_=label, id=reply.msg_id)


async def wait(mailroom: Mailroom, params: WaitParams) -> WaitReply:
    """Wait (bounded) until anything arrives."""
    timeout = min(max(params.timeout, 0.0), MAX_WAIT)
    event = mailroom.arrived
    with trio.move_on_after(timeout):
        await event.wait()
        return WaitReply(arrived=1)
    return WaitReply(arrived=0)


class _Seen:
    """The ids a watch stream printed lately (bounded): a message resumed from the store and
    told live as well prints once."""

    def __init__(self, limit: int = SEEN_LIMIT) -> None:
        self._limit = limit
        self._ids: OrderedDict[str, None] = OrderedDict()

    def first(self, msg_id: str) -> bool:
        """Whether ``msg_id`` is new here (it is remembered from now on)."""
        if msg_id in self._ids:
            return False
        self._ids[msg_id] = None
        while len(self._ids) > self._limit:
            self._ids.popitem(last=False)
        return True


def _arrival(row: HeldRow, me: str, text: bool) -> Arrival:
    view = view_of(row, me)
    return Arrival(
        "arrival", view.id, view.from_, view.session, view.room, view.intent, view.kind,
        view.text if text else None, row.cursor,
    )


async def watch(
    daemon: Host, mailroom: Mailroom, params: WatchParams
) -> AsyncGenerator[Watching | Arrival, None]:
    """One line per message held for us, as it is held, for as long as the client stays (the
    words only if asked for). The first line says where it starts; with ``after`` (a cursor an
    earlier stream printed), the messages held since then come first, so a client that lost
    its daemon for a while resumes without a gap."""
    send, receive = trio.open_memory_channel[list[str]](WATCH_BUFFER)
    mailroom.watchers.add(send)  # before the store is read: nothing held after falls between
    me = daemon.keys.fingerprint if daemon.identity is not None else ""
    seen = _Seen()
    try:
        async with receive:
            yield Watching("watching", await daemon.store.read(last_cursor))
            cursor = params.after
            while cursor is not None:  # what was held while this client was away, in pages
                page = functools.partial(held_after, cursor=cursor, limit=BACKLOG_PAGE)
                rows = await daemon.store.read(page)
                for row in rows:
                    if seen.first(row.message_id):
                        yield _arrival(row, me, params.text)
                cursor = rows[-1].cursor if len(rows) == BACKLOG_PAGE else None
            async for ids in receive:
                rows = await daemon.store.read(functools.partial(held_with_ids, ids=ids))
                for row in rows:  # our own messages are not held: they are no arrival
                    if seen.first(row.message_id):
                        yield _arrival(row, me, params.text)
    finally:
        mailroom.watchers.discard(send)


async def asks(mailroom: Mailroom, _: NoParams) -> AsksReply:
    """The asks still waiting, and how many watch streams are on."""
    return AsksReply(waiting=sorted(mailroom.asks), watching=len(mailroom.watchers))


def plug(daemon: Host) -> Plugs:
    """``ask``, ``asks``, ``wait`` and ``watch``, fed by every arrival; ended asks applied."""
    mailroom = Mailroom(daemon)
    return Plugs(
        ops=(
            stream_op(ASK, functools.partial(ask, daemon, mailroom)),
            op(ASKS, functools.partial(asks, mailroom)),
            op(WAIT, functools.partial(wait, mailroom)),
            stream_op(WATCH, functools.partial(watch, daemon, mailroom)),
        ),
        appliers=(apply_ask_ended,),
        applied_listeners=(mailroom.applied,),
        local_listeners=(mailroom.applied,),  # watch and wait see posts and me/SESSION
    )


async def _tell_ended(daemon: Host, room_id: str, correlation: str) -> None:
    """Tell the room the ask ended unanswered, so the receiver withdraws its notice.

    Runs while the ask is being cancelled (a client that hung up), so it is shielded, and
    bounded: queuing the op is a local commit, and the outbox carries it from there.
    """
    with trio.move_on_after(ENDED_WAIT) as scope:
        scope.shield = True
        try:
            await daemon.send_op(room_id, AskEnded(correlation))
        except CrosstalkError as exc:  # a room we have since left: nobody to tell
            log.info("ask %s ended; not told: %s", correlation, exc.message)


def _recipient(conn: sqlite3.Connection, to: str) -> str:
    """The fingerprint an ask waits on (asks go to a person, not a room)."""
    if to.startswith(("#", "me/")):
        raise UsageError("Ask a person (name or name/session), not a room.")
    return contact_named(conn, to.partition("/")[0]).fingerprint
