"""``caught_up``: once the network has healed, every room applies what its link committed within
a bound of virtual time, whether or not another op arrives for it.

The other checkers look after the liveness phase, whose reads and receipts wake every room
again, so a room that a reconnect left behind (its ops committed, its actor never told) looked
caught up in the end. Here the runner looks at each node's file twice during the quiet period
after healing, ``LOOK`` seconds apart, before any client acts again: an op the link had
committed and the room had not applied at the first look must be applied by the second. The
link's backoff caps at 30 s, so by the first look (``QUIET - LOOK`` after healing) every link is
back and what it was owed has arrived.

The looks read the SQLite file through a connection of their own (read-only, outside the
node's Store): looking changes nothing in the run.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from tests.sim.truth import Failure, Truth
from tests.sim.world import World

LOOK = 30.0  # seconds between the two looks

_BEHIND = (
    "SELECT r.room_id, min(i.seq) FROM rooms r JOIN relay_inbound i ON i.room_id = r.room_id "
    "WHERE r.state = 'joined' AND r.removed_at IS NULL AND i.seq > coalesce("
    "(SELECT seq FROM room_cursors c WHERE c.room_id = r.room_id), 0) GROUP BY r.room_id"
)


def behind(db: Path) -> dict[str, int]:
    """Per room this node is in: the oldest op its link committed that the room has not applied
    (a room caught up is not listed)."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        return {str(room): int(seq) for room, seq in conn.execute(_BEHIND).fetchall()}


def still_behind(first: dict[str, int], then: dict[str, int]) -> dict[str, int]:
    """The rooms whose oldest unapplied op at the first look is still unapplied at the second."""
    return {room: seq for room, seq in first.items() if then.get(room) == seq}


def check_caught_up(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    for name, node in world.nodes.items():
        looked = states[name].get("caught_up")
        if looked is None:
            continue
        world.count("check:caught_up")
        if looked["first"]:
            world.count("check:caught_up:waiting")
        for room, seq in sorted(looked["still"].items()):
            if truth.member_now(room, node.fp):
                out.append(Failure("caught_up", f"{name} left op seq {seq} of room {room[:6]} "
                                   f"unapplied for {LOOK:g} s after healing (committed by its "
                                   "link, its room never woken)"))
    return out
