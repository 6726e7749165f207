"""What a member is told when someone in the room decides something.

Theory of operation
-------------------
A decision is a memory write (``DecisionMade`` inside a ``MemoryEnvelope``): every member's
replica records it. Recording is not telling, so each member's daemon also turns the decision,
once, into an *announcement*: a held message of kind ``decision`` that goes through the
attention gate like any arrival (triaged like an answer: a line at the member's next event,
words only at ``deliver``, nothing at ``mute``), shows in ``read`` and ``watch``, and is
withdrawn once read. The decider is never told about their own decision.

:func:`announcement` builds that message from the op and where it sat in the log, and
:func:`announced` from an applied op (None unless it is someone else's decision); both are pure.
Its id is the memory op's id, so a re-delivered op announces nothing twice.
"""

from __future__ import annotations

from crosstalk.core.room import Applied
from crosstalk.core.triage import Intent, Kind
from crosstalk.wire.memory import DecisionMade
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp


def announcement(op: DecisionMade, *, op_id: str, label: str, at: float) -> MessageOp:
    """The message that announces ``op`` to a member (``label``: the decider's own name)."""
    text = f"Decided: {op.text}" + (f"\nWhy: {op.why}" if op.why.strip() else "")
    return MessageOp(
        msg_id=op_id,
        text=text,
        intent=Intent.FYI,
        kind=Kind.DECISION,
        from_label=label,
        sent_at=at,
    )


def announced(applied: Applied, *, me: str) -> MessageOp | None:
    """The announcement for ``applied`` if it is someone else's decision, else None."""
    envelope = applied.op
    if not isinstance(envelope, MemoryEnvelope) or not isinstance(envelope.op, DecisionMade):
        return None
    if applied.sender == me:
        return None  # our own (from another of our machines): nobody to tell
    at = envelope.at or applied.relay_ts
    return announcement(envelope.op, op_id=applied.op_id, label=envelope.label, at=at)
