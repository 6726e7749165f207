"""The room's rules for an inbound op: open, hold or reject, for every combination."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.core.room import Verdict, decide


@pytest.mark.parametrize(
    ("sender_known", "key_known", "epoch", "newest", "verdict"),
    [
        # A sender we do not know yet waits, whatever we know of the epoch.
        (False, True, 0, 0, Verdict.HOLD),
        (False, False, 3, 1, Verdict.HOLD),
        (False, False, 0, 1, Verdict.HOLD),
        # Known sender, known key: open (the seal and signature are checked next).
        (True, True, 0, 0, Verdict.OPEN),
        (True, True, 1, 3, Verdict.OPEN),
        # Known sender, an epoch newer than any key we hold: its rekey is on its way.
        (True, False, 2, 1, Verdict.HOLD),
        # Known sender, an older epoch we never had: sealed before we joined.
        (True, False, 0, 1, Verdict.REJECT),
        (True, False, 1, 1, Verdict.REJECT),
    ],
)
def test_each_case(
    sender_known: bool, key_known: bool, epoch: int, newest: int, verdict: Verdict
) -> None:
    """The table of the module docstring, case by case."""
    decision = decide(
        epoch=epoch, key_known=key_known, newest_epoch=newest, sender_known=sender_known
    )
    assert decision.verdict is verdict
    assert (decision.why == "") is (verdict is Verdict.OPEN)


def test_every_combination_has_one_verdict_and_only_a_known_key_opens() -> None:
    """Over all inputs in a small range: OPEN exactly when sender and key are known; REJECT
    only for an epoch at or below the newest key (never for one that may still come)."""
    for sender, key, epoch, newest in itertools.product(
        (False, True), (False, True), range(4), range(4)
    ):
        got = decide(epoch=epoch, key_known=key, newest_epoch=newest, sender_known=sender)
        assert (got.verdict is Verdict.OPEN) == (sender and key)
        if got.verdict is Verdict.REJECT:
            assert epoch <= newest and sender and not key
