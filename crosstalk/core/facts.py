"""Facts: the deterministic rules for add, confirm, correct and forget.

Theory of operation
-------------------
:class:`crosstalk.core.memory.MemoryState` calls :func:`apply_fact_op` once per fact op, in
room-log order, with the record the op names (or None) and the op's envelope context. It returns
the new record (None when nothing changes) and an :class:`OutcomeCode`. Nothing here depends on
anything but its arguments, so every replica that applies the same log gets the same facts.

A fact has two states, live and forgotten (``FactRecord.forgotten``); forgetting is final.

    add      unknown id         -> live fact; the sender is author and stands behind the text
             existing id        -> ALREADY_EXISTS (the first add in log order stands)
    confirm  live               -> the sender joins ``confirmations`` (or refreshes their time;
                                   the person behind the text only refreshes the age)
    correct  live               -> new text; the old text, who stood behind it and why it changed
                                   go into ``revisions``; the corrector now stands behind it
    forget   live               -> forgotten (who and when are kept; the record stays)
    confirm/correct/forget on a forgotten fact -> FORGOTTEN, no change
    anything but add on an unknown id         -> UNKNOWN_ID, no change

Invariants: a fact is never removed (leaving the room does not touch facts); ``author`` never
changes; ``last_affirmed`` is the maximum timestamp of the add, confirms and corrections, taken as a
maximum rather than "latest applied" because log order and senders' clocks need not agree.
"""

from __future__ import annotations

import attrs

from crosstalk.wire.memory import (
    Confirmation,
    FactAdd,
    FactConfirm,
    FactCorrect,
    FactForget,
    FactRecord,
    Forgetting,
    OpContext,
    OutcomeCode,
    Revision,
)

FactOp = FactAdd | FactConfirm | FactCorrect | FactForget
FactResult = tuple[FactRecord | None, OutcomeCode]


def apply_fact_op(current: FactRecord | None, op: FactOp, ctx: OpContext) -> FactResult:
    """Apply one fact op to the record it names.

    Args:
        current: the fact with ``op.fact_id``, or None if there is none.
        op: the op, already sequenced by the relay.
        ctx: the op's place in the log and its sender.

    Returns:
        The replacement record (None if unchanged) and what happened.
    """
    if isinstance(op, FactAdd):
        return _add(current, op, ctx)
    if current is None:
        return None, OutcomeCode.UNKNOWN_ID
    if current.forgotten is not None:
        return None, OutcomeCode.FORGOTTEN
    handler = _ON_LIVE_FACT[type(op)]
    return handler(current, op, ctx), OutcomeCode.APPLIED


def _add(current: FactRecord | None, op: FactAdd, ctx: OpContext) -> FactResult:
    if current is not None:
        return None, OutcomeCode.ALREADY_EXISTS
    record = FactRecord(
        fact_id=op.fact_id,
        text=op.text,
        tags=op.tags,
        author=ctx.person,
        added_at=ctx.ts,
        added_seq=ctx.seq,
        text_by=ctx.person,
        last_affirmed=ctx.ts,
    )
    return record, OutcomeCode.APPLIED


def _confirm(current: FactRecord, op: FactOp, ctx: OpContext) -> FactRecord:
    affirmed = max(current.last_affirmed, ctx.ts)
    if ctx.sender == current.text_by.fingerprint:
        # The person behind the text confirming it again only says "still true".
        return attrs.evolve(current, last_affirmed=affirmed)
    confirmations = list(current.confirmations)
    mine = Confirmation(by=ctx.person, at=ctx.ts)
    for index, existing in enumerate(confirmations):
        if existing.by.fingerprint == ctx.sender:
            # Keep their place in the list; refresh label and time.
            confirmations[index] = Confirmation(by=ctx.person, at=max(existing.at, ctx.ts))
            break
    else:
        confirmations.append(mine)
    return attrs.evolve(current, confirmations=tuple(confirmations), last_affirmed=affirmed)


def _correct(current: FactRecord, op: FactOp, ctx: OpContext) -> FactRecord:
    assert isinstance(op, FactCorrect)
    revision = Revision(
        previous_text=current.text,
        previous_by=current.text_by,
        previous_confirmations=current.confirmations,
        corrected_by=ctx.person,
        because=op.because,
        at=ctx.ts,
        seq=ctx.seq,
    )
    return attrs.evolve(
        current,
        text=op.text,
        text_by=ctx.person,
        confirmations=(),
        revisions=(*current.revisions, revision),
        last_affirmed=max(current.last_affirmed, ctx.ts),
    )


def _forget(current: FactRecord, op: FactOp, ctx: OpContext) -> FactRecord:
    return attrs.evolve(current, forgotten=Forgetting(by=ctx.person, at=ctx.ts, seq=ctx.seq))


# The transitions of a live fact, by op kind (add is handled before a record exists).
_ON_LIVE_FACT = {
    FactConfirm: _confirm,
    FactCorrect: _correct,
    FactForget: _forget,
}
