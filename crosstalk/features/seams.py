"""The daemon's feature seams: every feature's :class:`~crosstalk.features.feature.Plugs`,
gathered seam by seam in FEATURES order, once, before the daemon starts.

The daemon reads these lists when it starts its actors (the appliers, scopes and key takers go
to each room actor, the listeners and subscribers to the fan-out; the children start in order,
then the start hooks run) and serves the op table on its control socket.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from crosstalk.actors.children import ChildSpec, DynamicKind
from crosstalk.actors.control import OpTable
from crosstalk.actors.fanout import Subscriber
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.actors.room import AppliedListener, Applier, ApplyScope
from crosstalk.core.room import Applied
from crosstalk.features.feature import (
    LinkUpListener,
    Plugs,
    SentListener,
    SentWriter,
    StartHook,
    StatusRead,
)
from crosstalk.wire.room_ops import RoomOp


class Seams:
    """Every feature's plugs, seam by seam (see :class:`Plugs` for what each seam is)."""

    def __init__(self) -> None:
        self.ops = OpTable()
        self.appliers: list[Applier] = []
        self.apply_scopes: list[ApplyScope] = []
        self.key_takers: list[Applier] = []
        self.applied_listeners: list[AppliedListener] = []
        self.applied_subscribers: list[Subscriber] = []
        self.local_listeners: list[AppliedListener] = []
        self.sent_writers: list[SentWriter] = []
        self.sent_listeners: list[SentListener] = []
        self.children: list[ChildSpec[Any]] = []
        self.spawns: list[DynamicKind] = []
        # The children and start hooks together, in FEATURES order (each feature's children
        # before its hooks): the order the daemon starts them in.
        self.start_steps: list[ChildSpec[Any] | StartHook] = []
        self.link_up_listeners: list[LinkUpListener] = []
        self._status: dict[str, StatusRead] = {}

    def add(self, name: str, plugs: Plugs) -> None:
        """Add one feature's plugs after those added before it."""
        for control_op in plugs.ops:
            control_op.install(self.ops)
        self.appliers.extend(plugs.appliers)
        self.apply_scopes.extend(plugs.apply_scopes)
        self.key_takers.extend(plugs.key_takers)
        self.applied_listeners.extend(plugs.applied_listeners)
        self.applied_subscribers.extend(plugs.applied_subscribers)
        self.local_listeners.extend(plugs.local_listeners)
        self.sent_writers.extend(plugs.sent_writers)
        self.sent_listeners.extend(plugs.sent_listeners)
        self.children.extend(plugs.children)
        self.spawns.extend(plugs.spawns)
        self.start_steps.extend((*plugs.children, *plugs.start))
        self.link_up_listeners.extend(plugs.link_up_listeners)
        if plugs.status is not None:
            self._status[name] = plugs.status

    async def tell_local(self, applied: list[Applied]) -> None:
        """Hand arrivals that crossed no relay to every local listener, in order."""
        for listener in self.local_listeners:
            await listener(applied)

    def outbox_write(
        self, room_id: str, op_id: str, op: RoomOp, also: OutboxWrite | None
    ) -> OutboxWrite | None:
        """What the outbox transaction of our op also writes: the caller's ``also``, then every
        sent writer in order."""
        writers = self.sent_writers
        if also is None and not writers:
            return None

        def write(conn: sqlite3.Connection) -> None:
            if also is not None:
                also(conn)
            for writer in writers:
                writer(conn, room_id, op_id, op)

        return write

    async def status(self) -> dict[str, Any]:
        """What each feature shows in ``status``, by feature name."""
        return {name: await read() for name, read in self._status.items()}
