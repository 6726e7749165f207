"""The room's rules for an inbound op, before anything opens it (sans-IO).

Theory of operation
-------------------
A room applies its log in the relay's order, one op after another, and each op is in one of
three cases, decided only from what this member knows when it gets to it:

* **open** — we hold the key of the op's epoch and a key for its sender (a member, present or
  gone: what someone signed before they left still verifies). It is then decrypted and its
  signature checked; if either fails the op is rejected after all.
* **hold** — it may open once we know more: its sender is not in our roster yet (the relay's
  roster push that names them has not been reconciled), or its epoch is newer than every key we
  hold (the rekey that carries it has not arrived). The op, and every op after it, waits for the
  next wake; nothing is dropped, so memory and claims still see the log in order.
* **reject** — it will never open here: its epoch is older than the keys we hold but not one of
  them (sealed before we joined).

:class:`Applied` is one op as the appliers of each feature see it.
"""

from __future__ import annotations

import enum

import attrs

from crosstalk import sim_hooks
from crosstalk.wire.room_ops import RoomOp


class Verdict(enum.Enum):
    OPEN = "open"
    HOLD = "hold"
    REJECT = "reject"


@attrs.frozen
class Decision:
    verdict: Verdict
    why: str = ""


_OPEN = Decision(Verdict.OPEN)  # nearly every op's: made once, not once per op of a catch-up


def decide(*, epoch: int, key_known: bool, newest_epoch: int, sender_known: bool) -> Decision:
    """What to do with an inbound op sealed under ``epoch`` (see the module docstring)."""
    if not sender_known:
        sim_hooks.probe("room.held_unknown_sender")
        return Decision(Verdict.HOLD, "its sender is not in our roster yet")
    if key_known:
        return _OPEN
    if epoch > newest_epoch:
        sim_hooks.probe("room.held_future_epoch")
        return Decision(Verdict.HOLD, f"we have no key for epoch {epoch} yet")
    sim_hooks.probe("room.rejected_old_epoch")
    return Decision(Verdict.REJECT, f"it is sealed under epoch {epoch}, before we joined")


@attrs.frozen
class Applied:
    """One op of the room log as this room applies it: where it sits, who signed it, what it is.

    ``op`` is None for an op that was rejected (did not open or verify); appliers that track
    the log's sequence (room memory) still see its ``seq``.
    """

    room_id: str
    seq: int
    op_id: str
    sender: str  # the fingerprint whose roster key verified the signature
    relay_ts: float
    op: RoomOp | None
    epoch: int = 0  # the key epoch it was sealed under (what its sender held then)
