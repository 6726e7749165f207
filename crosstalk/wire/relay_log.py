"""Relay room-log frames: posting ops, their delivery, acknowledgement and replay.

``post {room, op_id, body}`` -> ``posted {room, seq, ts}`` once committed; ``op`` pushes to every
other device of every joined member; ``ack {room, seq}``; ``resume {cursors}`` replays everything
after each cursor and answers ``resumed`` (with each room's ``first`` held seq, so a gap is
visible); live ops flow to a connection only after it has sent ``resume``. Cursors are per device
and also cover the device's own posts: ack the highest seq you hold, counting ``posted`` replies,
or the room's backlog will count your own ops against you. Dedupe on ``(room, op_id)`` lasts
while the op is held. Ops are the only pushes stored for absent devices.
Import these names through :mod:`crosstalk.wire.relay`, which also holds the codec.
"""

from __future__ import annotations

import attrs

MAX_OP_BODY = 1 << 20


@attrs.frozen
class ResumedRoom:
    """Where a resumed room stands: ``first`` is the oldest seq still held, ``head`` the newest."""

    room: str
    first: int
    head: int


# --- client -> relay ---------------------------------------------------------------------------


@attrs.frozen
class Post:
    req: int
    room: str
    op_id: str
    body: bytes


@attrs.frozen
class Ack:
    room: str
    seq: int


@attrs.frozen
class Resume:
    req: int
    cursors: dict[str, int]


# --- relay -> client ---------------------------------------------------------------------------


@attrs.frozen
class Posted:
    req: int
    room: str
    seq: int
    ts: float = 0.0  # the relay's time for the op, as its pushes carry it (0: a relay before it)


@attrs.frozen
class Op:
    room: str
    seq: int
    sender: str
    op_id: str
    body: bytes
    ts: float


@attrs.frozen
class Resumed:
    req: int
    rooms: list[ResumedRoom]
    missing: list[str]
