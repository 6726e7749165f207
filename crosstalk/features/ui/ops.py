"""The page's daemon side: ``ui_open`` (start the web server, mint a token), and read-only
queries the page needs that no other op answers (``ui_room``: a room's conversation and claim
history; ``ui_marks``: a digest per room that changes when its conversation does).

Everything the person does from the page is an existing op, called in-process through the
daemon's own :class:`~crosstalk.actors.control.OpTable` (:func:`call_op`), so the page and the
CLI can never disagree about what an action means.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from contextlib import aclosing
from typing import Any, Protocol

import trio

from crosstalk.actors.children import DynamicKind
from crosstalk.actors.control import OpTable
from crosstalk.actors.fanout import coalescing
from crosstalk.errors import CrosstalkError, Unavailable
from crosstalk.features.caps import CallsOps, Identified, Stored, Supervises
from crosstalk.features.feature import Plugs, op
from crosstalk.features.ui.hub import UiHub
from crosstalk.store import ui as q
from crosstalk.wire.control import ControlRequest
from crosstalk.wire.control.params import NoParams, RoomParams
from crosstalk.wire.control.replies.daemon import MarksReply, PageRoomReply, UiOpenReply
from crosstalk.wire.control.table import UI_MARKS, UI_OPEN, UI_ROOM
from crosstalk.wire.converter import unstructure
from crosstalk.wire.room_ops import MessageOp, RoomOp

UI = DynamicKind("ui", "features/ui, at the first `ui_open` (`crosstalk ui`)")


async def call_op(ops: OpTable, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """One request/reply op, run in-process exactly as the control socket runs it."""
    async with aclosing(ops.replies(ControlRequest(name, params))) as replies:
        async for reply in replies:
            return reply
    raise CrosstalkError(f"The daemon's {name!r} gave no answer.")


class Host(Stored, Identified, Supervises, CallsOps, Protocol):
    """What the page uses: the store, who we are, its web server actor, and the op table every
    action on the page goes through."""


def _me(daemon: Host) -> str:
    return daemon.keys.fingerprint if daemon.identity is not None else ""


def keep_words(conn: sqlite3.Connection, room_id: str, op_id: str, op: RoomOp) -> None:
    """Sent writer: keep the words of a message we sent (the relay never echoes them), in the
    transaction that queues it."""
    if isinstance(op, MessageOp):
        q.record_sent(conn, msg_id=op_id, room_id=room_id, body=unstructure(op), now=time.time())


async def page_changed(hub: UiHub, *_: object) -> None:
    """Tell live pages to look at the store again (they re-read it, so no details are needed)."""
    hub.changed()


async def _start_server(daemon: Host, hub: UiHub) -> None:
    # hypercorn and starlette only once the page is used: a tenth of the daemon's imports, and
    # they would delay its first answer at every start.
    from crosstalk.features.ui.actor import UiServer
    from crosstalk.features.ui.web import build_app

    app = build_app(hub, lambda name, params: call_op(daemon.ops, name, params))
    server = UiServer(app, port=0, on_bound=lambda port: setattr(hub, "port", port))
    await daemon.supervisor.start_actor(UI.name, server)


async def ui_open(daemon: Host, hub: UiHub, start_lock: trio.Lock, _: NoParams) -> UiOpenReply:
    """Start the page's web server once, and mint a token for one more page."""
    async with start_lock:
        if hub.port is None:
            await _start_server(daemon, hub)
    if hub.port is None:
        raise Unavailable("The page's web server did not start; `crosstalk doctor` says why.")
    return UiOpenReply(f"http://127.0.0.1:{hub.port}/?t={hub.mint()}")


async def ui_room(daemon: Host, params: RoomParams) -> PageRoomReply:
    """A room's conversation and claim history, as the page shows them."""
    me = _me(daemon)

    def gather(conn: sqlite3.Connection) -> PageRoomReply:
        return PageRoomReply(params.room, q.conversation(conn, params.room, me),
                         q.claim_history(conn, params.room))

    return await daemon.store.read(gather)


async def ui_marks(daemon: Host, _: NoParams) -> MarksReply:
    """A digest per room that changes when its conversation does."""
    return await daemon.store.read(lambda c: MarksReply(q.room_marks(c, q.room_ids(c))))


def plug(daemon: Host) -> Plugs:
    """Add the page's ops, keep the words of what we send, and nudge live pages on changes."""
    hub = UiHub()
    return Plugs(
        ops=(
            op(UI_OPEN, functools.partial(ui_open, daemon, hub, trio.Lock())),
            op(UI_ROOM, functools.partial(ui_room, daemon)),
            op(UI_MARKS, functools.partial(ui_marks, daemon)),
        ),
        sent_writers=(keep_words,),
        sent_listeners=(functools.partial(page_changed, hub),),
        # The page re-reads the store when told something changed: a coalescing subscriber.
        applied_subscribers=(coalescing("ui", functools.partial(page_changed, hub)),),
        local_listeners=(functools.partial(page_changed, hub),),
        spawns=(UI,),
    )
