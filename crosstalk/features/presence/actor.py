"""The presence actor: publishes our live sessions into every joined room when they change.

It checks the sessions table every :data:`~crosstalk.features.presence.core.CHECK_EVERY`
seconds (waiting on its inbox meanwhile, which counts as beating) and posts a
``SessionsPublished`` into each room :class:`~crosstalk.features.presence.core.Publisher` says
is due. A post that fails (a room we just left, a room actor restarting) is due again at the
next check.
"""

from __future__ import annotations

import functools
import logging
import sqlite3
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs
import trio

from crosstalk.actors.context import ActorContext
from crosstalk.errors import CrosstalkError
from crosstalk.features.presence.core import CHECK_EVERY, Publisher, published
from crosstalk.logs import repeats_from_env
from crosstalk.store import membership_chain as mc
from crosstalk.store.rooms import list_rooms
from crosstalk.store.sessions import list_sessions
from crosstalk.wire.room_ops import RoomOp, SessionsPublished

log = logging.getLogger(__name__)
R = TypeVar("R")


class StoreLike(Protocol):
    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...


class SendOpFn(Protocol):
    async def __call__(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str: ...


def _now_playing(conn: sqlite3.Connection) -> tuple[SessionsPublished, list[str]]:
    rooms = [r.room_id for r in list_rooms(conn) if r.state == "joined"]
    return published(list_sessions(conn), time.time()), rooms


class PresenceActor:
    """Publishes our sessions to our roommates; ``ready`` says whether there is an identity."""

    def __init__(
        self, *, store: StoreLike, send_op: SendOpFn, ready: Callable[[], bool]
    ) -> None:
        self._store = store
        self._send_op = send_op
        self._ready = ready
        self._publisher = Publisher()
        # A room that refuses our post (we were removed from it, say) refuses it every check:
        # said once per reason, then summarised (issue 38: one line a second, 18 MB a day).
        self._failing = repeats_from_env()

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            if self._ready():
                await self._publish()
            ctx.beat()
            with trio.move_on_after(CHECK_EVERY):
                await ctx.receive()

    async def _publish(self) -> None:
        op, rooms = await self._store.read(_now_playing)
        self._publisher.forget_others(rooms)
        now = time.time()
        for room in self._publisher.due(rooms, op, now):
            index, link = await self._store.read(functools.partial(mc.head, room_id=room))
            try:  # with where our membership history stands, for roommates to compare
                await self._send_op(room, attrs.evolve(op, membership=index,
                                                       membership_link=link))
            except CrosstalkError as exc:
                say = self._failing.seen(room, exc.message, trio.current_time())
                if say is not None:
                    log.info("presence: sessions not published to %s: %s%s", room, exc.message,
                             say.note)
                continue
            if self._failing.cleared(room) is not None:
                log.info("presence: sessions published to %s again", room)
            self._publisher.posted(room, op, now)
            log.debug("presence: %d session(s) published to %s", len(op.sessions), room)
