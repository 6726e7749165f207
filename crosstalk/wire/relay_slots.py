"""Relay pairing-slot frames: a short numbered rendezvous two identities meet through.

``slot_open`` -> ``slot {slot: "NNNN", expires_in: 900}``; ``slot_join`` (one attempt per slot;
missed joins are rate-limited per source address) -> ``slot_joined`` with the owner's keys, and
the owner is pushed ``slot_joined`` with the joiner's; ``slot_send {slot, index 0-15, data
<= 8 KiB}`` (write-once per side and index, pushed as ``slot_msg``); ``slot_attach`` after a
reconnect replays the other side's parts; ``slot_close`` burns the slot (``slot_closed``).

Proof of work: ``work_ask {slot?}`` -> ``work {seed, bits}``; ``slot_open`` and ``slot_join``
then carry ``work``, a proof that SHA-256 over the seed starts with ``bits`` zero bits
(:func:`crosstalk.crypto.work_done`). ``bits`` is 0 when the relay asks nothing (the asker, or
the owner of the slot it names, shares a room with someone there). The seed is the connection's
and is spent by the next open or join. ``work`` was added later: a frame without it decodes with
an empty proof, which a relay that asks for work refuses with ``work_required``.
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
class WorkAsk:
    req: int
    slot: str = ""  # the slot about to be joined, if any (a known owner spares the joiner)


@attrs.frozen
class SlotOpen:
    req: int
    work: bytes = b""


@attrs.frozen
class SlotJoin:
    req: int
    slot: str
    work: bytes = b""


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
class Work:
    req: int
    seed: bytes
    bits: int


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
