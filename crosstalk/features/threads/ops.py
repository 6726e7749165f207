"""The threads feature's daemon side: ``thread`` and ``thread_close``, and the applier."""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from typing import Protocol

import attrs
import nacl.utils

from crosstalk.core.triage import Intent, Kind
from crosstalk.errors import CrosstalkError, TooLarge, UsageError
from crosstalk.features.caps import Identified, SendsOps, Stored
from crosstalk.features.feature import Plugs, op
from crosstalk.store.rooms import list_rooms
from crosstalk.store.threads import (
    apply_closing,
    record_closing,
    record_sent_summary,
    thread_key,
    thread_rooms,
    thread_view,
)
from crosstalk.wire.control.params import CloseParams, ThreadParams
from crosstalk.wire.control.replies.messages import CloseReply, ThreadView
from crosstalk.wire.control.table import THREAD, THREAD_CLOSE
from crosstalk.wire.room_ops import MAX_TEXT, MessageOp

log = logging.getLogger(__name__)


class Host(Stored, Identified, SendsOps, Protocol):
    """What threads use: the store, who we are, and the rooms a summary is posted into."""


def _me(daemon: Host) -> str:
    return daemon.keys.fingerprint if daemon.identity is not None else ""


async def _tell(daemon: Host, key: str, summary: str) -> list[str]:
    """Post the closing summary into every room the thread went through; the rooms told."""
    label = daemon.require_identity().label

    def rooms(conn: sqlite3.Connection) -> list[tuple[str, str]]:
        names = {r.room_id: r.name for r in list_rooms(conn) if r.state == "joined"}
        return [(r, names[r]) for r in thread_rooms(conn, key) if r in names]

    told = []
    for room_id, name in await daemon.store.read(rooms):
        op_id, now = nacl.utils.random(16).hex(), time.time()
        op = MessageOp(
            msg_id=op_id, text=summary, intent=Intent.FYI, kind=Kind.MESSAGE, from_label=label,
            thread=key, sent_at=now, closes_thread=True,
        )
        # Our side of the summary is kept in the commit that queues it: no write of its own.
        keep = functools.partial(
            record_sent_summary, msg_id=op_id, room_id=room_id, to_label=name, now=now,
            thread=key, summary=summary,
        )
        try:
            await daemon.send_op(room_id, op, op_id=op_id, also=keep)
        except CrosstalkError as exc:
            log.info("thread %s: summary not posted to %s: %s", key, room_id, exc.message)
            continue
        told.append(name)
    return told


async def thread(daemon: Host, params: ThreadParams) -> ThreadView:
    """The ``thread`` op: one thread's messages."""
    def view(conn: sqlite3.Connection) -> ThreadView:
        return thread_view(conn, thread_key(conn, params.id), me=_me(daemon))

    return await daemon.store.read(view)


async def thread_close(daemon: Host, params: CloseParams) -> CloseReply:
    """The ``thread_close`` op: post the closing summary into every room the thread went through."""
    summary = params.summary.strip()
    if not summary:
        raise UsageError("Say how the thread ended: --summary TEXT.")
    if len(summary) > MAX_TEXT:
        raise TooLarge(f"A summary is at most {MAX_TEXT} characters.")
    key = await daemon.store.read(lambda c: thread_key(c, params.id))
    label = daemon.require_identity().label
    await daemon.store.write(
        lambda c: record_closing(c, key, summary, label, time.time(),
                                 next(iter(thread_rooms(c, key)), None))
    )
    told = await _tell(daemon, key, summary)
    view = await daemon.store.read(lambda c: thread_view(c, key, me=_me(daemon)))
    return CloseReply(**attrs.asdict(view, recurse=False), told=told)


def plug(daemon: Host) -> Plugs:
    """The closing applier and the ``thread`` and ``thread_close`` ops."""
    return Plugs(
        ops=(
            op(THREAD, functools.partial(thread, daemon)),
            op(THREAD_CLOSE, functools.partial(thread_close, daemon)),
        ),
        appliers=(apply_closing,),
    )
