"""The relay's own order of events (its committed writes), read as membership intervals: the
ground truth every checker compares the nodes' stores with (see :mod:`tests.sim.checkers`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import attrs

from tests.sim.net import LATER
from tests.sim.world import World

INF = 10**12


@attrs.frozen
class Failure:
    checker: str
    detail: str


class Truth:
    """Intervals, invitations and posts from the relay's commit log."""

    def __init__(self, world: World) -> None:
        self.intervals: dict[tuple[str, str], list[list[int]]] = defaultdict(list)
        self.invites: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.posts: list[Any] = []
        self.refused = {op: code for op, code in world.relay.refused.items() if code not in LATER}
        for t in world.relay.truth:
            spans = self.intervals[(t.room, t.fp)]
            if t.kind == "join" and (not spans or spans[-1][1] != INF):
                spans.append([t.step, INF])
            elif t.kind == "invite":
                self.invites[(t.room, t.fp)].append(t.step)
            elif t.kind == "drop" and spans and spans[-1][1] == INF:
                spans[-1][1] = t.step
            elif t.kind == "gone":
                for (room, _), sp in self.intervals.items():
                    if room == t.room and sp and sp[-1][1] == INF:
                        sp[-1][1] = t.step
            elif t.kind == "post":
                self.posts.append(t)

    def member_at(self, room: str, fp: str, step: int) -> bool:
        return any(a < step < b for a, b in self.intervals.get((room, fp), []))

    def member_since(self, room: str, fp: str, step: int) -> bool:
        """``fp`` is a member now, without a break since ``step``."""
        spans = self.intervals.get((room, fp), [])
        return bool(spans) and spans[-1][1] == INF and spans[-1][0] < step

    def member_now(self, room: str, fp: str) -> bool:
        spans = self.intervals.get((room, fp), [])
        return bool(spans) and spans[-1][1] == INF

    def out_at(self, room: str, fp: str, step: int) -> bool:
        """``fp`` had left or been removed by ``step`` and was not invited back since.

        The window closes at the next *invitation*, not the next join: whoever invites a member
        back seals the room's current key to them, so an op posted after that is one the room
        chose to let them read. (The old check closed it at the join and flagged seed 58: a fact
        posted between n1's re-invitation and its accept, which n1 rightly opened.)
        """
        ended = [b for a, b in self.intervals.get((room, fp), []) if b < step]
        if not ended or self.member_at(room, fp, step):
            return False
        last_drop = max(ended)
        return not any(last_drop < i < step for i in self.invites.get((room, fp), []))


def whole(states: dict[str, Any], name: str, room: str) -> bool:
    """``name``'s memory of ``room`` has no hole and gave nothing up: what it decided is final
    (a memory that gave ops up decides provisionally until a repair; core.memory.final_on)."""
    s = states[name]
    return room not in s["memory_holes"] and room not in s["memory_gave_up"]


def replicas(world: World, truth: Truth,
              states: dict[str, Any]) -> dict[str, dict[str, int | None]]:
    """Per room, its current members and where their memory still has a hole (None: none).
    The members without one hold whole replicas, which must agree on everything memory holds."""
    out: dict[str, dict[str, int | None]] = defaultdict(dict)
    for name, node in world.nodes.items():
        holes = states[name]["memory_holes"]
        for room in sorted(states[name]["rooms"]):
            if truth.member_now(room, node.fp):
                out[room][name] = holes.get(room)
    return out
