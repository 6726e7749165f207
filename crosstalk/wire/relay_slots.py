"""Relay pairing-slot frames: a short numbered rendezvous two identities meet through.

``slot_open`` -> ``slot {slot: "NNNN", expires_in: 900}``; ``slot_join`` (one attempt per slot;
missed joins are rate-limited per source address) -> ``slot_joined`` with the owner's keys, and
the owner is pushed ``slot_joined`` with the joiner's; ``slot_send {slot, index 0-15, data
<= 8 KiB}`` (write-once per side and index, pushed as ``slot_msg``); ``slot_attach`` after a
reconnect replays the other side's parts; ``slot_close`` burns the slot (``slot_closed``).
Import these names through :mod:`crosstalk.wire.relay`, which also holds the codec.
"""

from __future__ import annotations

from typing import Literal

import attrs

MAX_SLOT_DATA = 8 << 10
MAX_SLOT_INDEX = 15

Side = Literal["owner", "joiner"]


# --- client -> relay ---------------------------------------------------------------------------


@attrs.frozen
class SlotOpen:
    req: int


@attrs.frozen
class SlotJoin:
    req: int
    slot: str


@attrs.frozen
class SlotAttach:
    req: int
    slot: str


@attrs.frozen
class SlotSend:
    req: int
    slot: str
    index: int
    data: bytes


@attrs.frozen
class SlotClose:
    req: int
    slot: str


# --- relay -> client ---------------------------------------------------------------------------


@attrs.frozen
class Slot:
    req: int
    slot: str
    expires_in: float


@attrs.frozen
class SlotJoined:
    """To the owner (pushed): who joined. To the joiner (reply): who owns the slot."""

    req: int | None
    slot: str
    fingerprint: str
    ed_pub: bytes
    x_pub: bytes


@attrs.frozen
class SlotMsg:
    slot: str
    from_side: Side
    index: int
    data: bytes


@attrs.frozen
class SlotClosed:
    slot: str
    reason: str
