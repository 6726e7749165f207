"""Presence across relay nodes: who is online on the other nodes, over core NATS.

Theory of operation
-------------------
Each node publishes the identities it has online on ``N.presence.<node>`` when that set changes
(at once: a node may die any moment after a client said hello) and every ``beat``. An identity
counts as online elsewhere while some other node listed it within ``presence_timeout``; a node
not heard from that long has nobody online. What changes is handed to the core
(:meth:`~relay.core.RelayCore.presence_elsewhere`), whose frames go out through the node's
ordinary queue. Nothing here is durable: a node that dies takes its list with it, and the others
forget it after ``presence_timeout``. Times are Trio's clock (monotonic, as the waits here), so
a node runs on virtual time in the simulation.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import trio

from crosstalk.errors import StorageUnavailable
from relay.core import RelayCore
from relay.effects import Effect
from relay.nats_store import NatsStorage


@attrs.frozen
class NodeTimings:
    beat: float = 5.0  # seconds between presence announcements
    presence_timeout: float = 15.0  # a node not heard from this long has nobody online


class Presence:
    """One node's side of presence: announces its own identities, keeps the other nodes'."""

    def __init__(
        self, core: RelayCore, nats: NatsStorage, node: str, timings: NodeTimings,
        feed: Callable[[list[Effect]], None],
    ) -> None:
        self._core = core
        self._nats = nats
        self._node = node
        self._timings = timings
        self._feed = feed  # the node's ordinary queue of effects
        self._remote: dict[str, tuple[set[str], float]] = {}  # node -> (identities, heard at)
        self._announced: set[str] = set()
        self._identities_changed = trio.Event()  # an identity came or went here: announce now

    def changed(self) -> None:
        """An identity may have come or gone here: announce at once."""
        self._identities_changed.set()

    async def run(self) -> None:
        """Announce this node's identities when they change and every ``beat``; expire silent
        nodes."""
        t = self._timings
        subject = f"{self._nats.layout.ns}.presence.{self._node}"
        sent_at = -1e9
        while True:
            self._identities_changed = trio.Event()
            here = self._core.identities()
            now = trio.current_time()
            if here != self._announced or now - sent_at >= t.beat:
                body = json.dumps({"node": self._node, "fps": sorted(here)}).encode()
                try:
                    await self._nats.conn.publish(subject, body)
                    self._announced, sent_at = here, now
                except StorageUnavailable:
                    pass
            self._expire(now)
            with trio.move_on_after(min(t.beat, t.presence_timeout) / 4):
                await self._identities_changed.wait()

    def heard(self, data: bytes) -> None:
        """Another node's announcement (in Trio, in the order the feed took it in)."""
        try:
            body: Any = json.loads(data)
            node, fps = str(body["node"]), {str(fp) for fp in body["fps"]}
        except (ValueError, KeyError, TypeError):
            return
        if node == self._node:
            return
        before = self._elsewhere()
        self._remote[node] = (fps, trio.current_time())
        self._changed(before)

    def _expire(self, now: float) -> None:
        before = self._elsewhere()
        limit = self._timings.presence_timeout
        self._remote = {n: v for n, v in self._remote.items() if now - v[1] < limit}
        self._changed(before)

    def _elsewhere(self) -> set[str]:
        out: set[str] = set()
        for fps, _ in self._remote.values():
            out |= fps
        return out

    def _changed(self, before: set[str]) -> None:
        after = self._elsewhere()
        effects: list[Effect] = []
        for fp in sorted(after - before):
            effects += self._core.presence_elsewhere(fp, True)
        for fp in sorted(before - after):
            effects += self._core.presence_elsewhere(fp, False)
        self._feed(effects)
