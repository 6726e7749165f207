"""The run's history, Jepsen style: every client op as invoke then ok / fail / info.

``info`` means the outcome is unknown (the node crashed, or the op was cut off): that op may or
may not have taken effect. One JSON line per event; the hash of the lines (plus the scheduler and
relay canaries) is the run's fingerprint, equal for equal seeds.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import trio


@attrs.define
class Event:
    t: float
    node: str
    op: str
    phase: str  # invoke | ok | fail | info
    args: dict[str, Any]
    result: Any
    index: int = -1  # the workload action this event belongs to (-1: the harness)


def stamp(t: float) -> float:
    """A virtual time as the history records it (to the microsecond): compare another clock
    reading with an event's ``t`` only through this, or rounding puts it on the wrong side."""
    return round(t, 6)


class History:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(
        self, node: str, op: str, phase: str, args: dict[str, Any], result: Any, index: int = -1
    ) -> Event:
        try:
            now = stamp(trio.current_time())
        except RuntimeError:
            now = 0.0
        event = Event(now, node, op, phase, args, result, index)
        self.events.append(event)
        return event

    def lines(self) -> list[str]:
        return [json.dumps(attrs.asdict(e), sort_keys=True, default=str) for e in self.events]

    def digest(self) -> str:
        h = hashlib.sha256()
        for line in self.lines():
            h.update(line.encode() + b"\n")
        return h.hexdigest()

    def ok(self, op: str, node: str | None = None) -> list[Event]:
        return [
            e for e in self.events
            if e.op == op and e.phase == "ok" and (node is None or e.node == node)
        ]
