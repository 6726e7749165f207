"""Held until idle: released items come out once, as one batch per sender."""

from __future__ import annotations

from crosstalk.core.held import HeldBatch, HeldItem, next_release, surface_held
from crosstalk.core.mute import EVERYONE, MuteState
from crosstalk.core.triage import Decision, Intent, SessionStatus

IDLE = SessionStatus.IDLE
BUSY = SessionStatus.BUSY
NO_MUTES = MuteState()


def _held(
    item: str,
    sender: str,
    ts: float,
    *,
    decision: Decision = Decision.NOTICE_WHEN_IDLE,
    intent: Intent = Intent.FYI,
    session: str | None = None,
    room: str | None = "room-a",
) -> HeldItem:
    return HeldItem(
        item=item,
        sender=sender,
        label=sender.upper(),
        session=session,
        room=room,
        ts=ts,
        intent=intent,
        decision=decision,
        words=decision is Decision.DELIVER_WHEN_IDLE,
    )


def test_nothing_waiting_for_idle_surfaces_while_busy_or_unknown() -> None:
    """A busy or unknown session releases no fyi held for idle."""
    held = [_held("1", "marie", 10.0), _held("2", "jo", 11.0, decision=Decision.DELIVER_WHEN_IDLE)]
    for status in (BUSY, SessionStatus.UNKNOWN):
        out = surface_held(held, status, NO_MUTES, 20.0)
        assert out.batches == ()
        assert out.still_held == tuple(held)


def test_going_idle_releases_one_batch_per_sender_in_arrival_order() -> None:
    """Five held items from two senders become two batches, ordered by each one's first item."""
    m1 = _held("m1", "marie", 12.0, session="api")
    j1 = _held("j1", "jo", 10.0, session="web")
    m2 = _held("m2", "marie", 11.0, session="db")
    j2 = _held("j2", "jo", 14.0, session="web")
    m3 = _held("m3", "marie", 13.0, session="api", decision=Decision.DELIVER_WHEN_IDLE)
    out = surface_held([m1, j1, m2, j2, m3], IDLE, NO_MUTES, 20.0)
    assert out.still_held == ()
    assert out.batches == (
        HeldBatch(sender="jo", label="JO", sessions=("web",), items=(j1, j2)),
        HeldBatch(sender="marie", label="MARIE", sessions=("db", "api"), items=(m2, m1, m3)),
    )
    assert [item.words for item in out.batches[1].items] == [False, False, True]


def test_a_quiet_hold_stays_while_its_mute_lasts_even_when_idle() -> None:
    """An item held by a timed mute is not released by idleness alone."""
    mutes = MuteState().mute("marie", 10, now=0.0)
    quiet = _held("1", "marie", 5.0, decision=Decision.HOLD_QUIET, intent=Intent.QUESTION)
    out = surface_held([quiet], IDLE, mutes, 599.0)
    assert (out.batches, out.still_held) == ((), (quiet,))


def test_a_quiet_hold_surfaces_when_the_mute_ends() -> None:
    """At the mute's exact end a question lands even while busy; an fyi still waits for idle."""
    mutes = MuteState().mute("marie", 10, now=0.0)
    question = _held("q", "marie", 5.0, decision=Decision.HOLD_QUIET, intent=Intent.QUESTION)
    fyi = _held("f", "marie", 6.0, decision=Decision.HOLD_QUIET, intent=Intent.FYI)
    busy = surface_held([question, fyi], BUSY, mutes, 600.0)
    assert [b.items for b in busy.batches] == [(question,)]
    assert busy.still_held == (fyi,)
    idle = surface_held(busy.still_held, IDLE, mutes, 600.0)
    assert [b.items for b in idle.batches] == [(fyi,)]
    assert idle.still_held == ()


def test_a_room_mute_holds_items_that_arrived_in_that_room() -> None:
    """Muting a room holds what arrived there, and not what arrived elsewhere."""
    mutes = MuteState().mute("room-a", 10, now=0.0)
    in_a = _held("a", "marie", 1.0, decision=Decision.HOLD_QUIET, room="room-a")
    in_b = _held("b", "marie", 2.0, decision=Decision.HOLD_QUIET, room="room-b")
    out = surface_held([in_a, in_b], IDLE, mutes, 60.0)
    assert out.still_held == (in_a,)
    assert [b.items for b in out.batches] == [(in_b,)]


def test_next_release_is_the_earliest_mute_end_among_quiet_holds() -> None:
    """The shell learns when to look again: the soonest end of a mute holding something."""
    mutes = MuteState().mute("marie", 10, 0.0).mute("jo", 5, 0.0).mute(EVERYONE, 1, 0.0)
    held = [
        _held("1", "marie", 1.0, decision=Decision.HOLD_QUIET),
        _held("2", "jo", 2.0, decision=Decision.HOLD_QUIET),
        _held("3", "kim", 3.0),
    ]
    assert next_release(held, mutes, 30.0) == 300.0
    assert next_release(held, mutes, 300.0) == 600.0
    assert next_release(held, mutes, 600.0) is None
    assert next_release([held[2]], mutes, 30.0) is None
