"""The edits actor: tells rooms that share a repository which files our sessions wrote.

Its inbox gets a :class:`Touched` per ``edits_touched`` that recorded something (the op has
already committed the session's set to ``own_edits``); the
:class:`~crosstalk.core.edits.PublishSchedule` says when each room is due, and the actor waits
on its inbox until then. Due, it reads each source's current set and posts one
``EditsPublished`` per source. A room that has stopped sharing (we left it, or turned sharing
off meanwhile) is dropped; a post that fails for a passing reason is due again later.
"""

from __future__ import annotations

import logging
import math
import sqlite3
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

import attrs
import trio

from crosstalk.actors.context import ActorContext
from crosstalk.core.edits import PublishSchedule, Source, recent
from crosstalk.errors import CrosstalkError
from crosstalk.store import edits as db
from crosstalk.wire.room_ops import MAX_EDIT_NOTE, EditsPublished, RoomOp

log = logging.getLogger(__name__)
R = TypeVar("R")
MAX_NOTES = 512


class StoreLike(Protocol):
    async def read(self, fn: Callable[[sqlite3.Connection], R]) -> R: ...


class SendOpFn(Protocol):
    async def __call__(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str: ...


@attrs.frozen
class Touched:
    """``source`` changed; ``rooms`` share its repository; ``note`` is what it says it does."""

    source: Source
    rooms: tuple[str, ...]
    note: str = ""


def _still_sharing(conn: sqlite3.Connection) -> tuple[set[str], float]:
    joined, _ = db.sharing_inputs(conn)
    return set(joined) - db.rooms_off(conn), db.window(conn)


class EditsActor:
    """Debounced ``EditsPublished`` posts (see the module docstring); ``wall`` is Unix time."""

    def __init__(
        self, *, store: StoreLike, send_op: SendOpFn, wall: Callable[[], float] = time.time,
        schedule: PublishSchedule | None = None,
    ) -> None:
        self._store = store
        self._send_op = send_op
        self._wall = wall
        self._schedule = schedule or PublishSchedule()
        self._notes: dict[Source, str] = {}
        # What each room was last told of each source: telling it the same again is a no-op.
        self._told: dict[tuple[str, Source], tuple[object, ...]] = {}

    async def run(
        self,
        ctx: ActorContext[Touched],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        task_status.started()
        while True:
            due = self._schedule.next_due()
            with trio.move_on_at(math.inf if due is None else due):
                touched = await ctx.receive()
                self._take(touched, trio.current_time())
            await self._flush(trio.current_time(), ctx)

    def _take(self, touched: Touched, now: float) -> None:
        if touched.note or touched.source not in self._notes:
            self._notes.pop(touched.source, None)
            self._notes[touched.source] = touched.note[:MAX_EDIT_NOTE]
        while len(self._notes) > MAX_NOTES:  # the oldest sources' notes go first
            del self._notes[next(iter(self._notes))]
        for room in touched.rooms:
            self._schedule.touched(room, touched.source, now)

    async def _flush(self, now: float, ctx: ActorContext[Touched]) -> None:
        rooms = self._schedule.due(now)
        if not rooms:
            return
        sharing, window = await self._store.read(_still_sharing)
        for room, sources in rooms:
            if room not in sharing:
                self._schedule.forget(room)
                continue
            for index, source in enumerate(sources):
                if not await self._post(room, source, window):
                    self._schedule.failed(room, sources[index:], now)
                    break
                ctx.beat()

    async def _post(self, room: str, source: Source, window: float) -> bool:
        """Post ``source``'s current set to ``room``; False when it should be tried again."""
        kept = await self._store.read(lambda c: db.own_set(c, source.session, source.repo))
        paths = recent(kept, self._wall(), window)
        if not paths:  # aged out meanwhile: roommates forget it by its age, as we did
            return True
        op = EditsPublished(source.repo, source.session, paths, self._notes.get(source, ""))
        told = (op.paths, op.note)
        if self._told.get((room, source)) == told:
            return True
        try:
            await self._send_op(room, op)
        except CrosstalkError as exc:
            log.info("edits: not published to %s: %s", room, exc.message)
            return False
        self._told.pop((room, source), None)
        self._told[(room, source)] = told
        while len(self._told) > MAX_NOTES:
            del self._told[next(iter(self._told))]
        log.debug("edits: %d path(s) of %s published to %s", len(paths), source.session, room)
        return True
