"""Timed mutes: hold for N minutes, exact expiry edges, lifting, and what a mute covers."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.core.levels import local_key
from crosstalk.core.mute import EVERYONE, MAX_MINUTES, MuteState
from crosstalk.errors import UsageError


def test_a_mute_covers_until_its_end_and_not_at_it() -> None:
    """Muted for 10 minutes at t=100: muted at 699.999, no longer muted at exactly 700."""
    mutes = MuteState().mute("marie", 10, now=100.0)
    assert mutes.until == {"marie": 700.0}
    assert mutes.is_muted("marie", 100.0)
    assert mutes.is_muted("marie", 699.999)
    assert not mutes.is_muted("marie", 700.0)
    assert not mutes.is_muted("jo", 100.0)


def test_zero_minutes_lifts_the_mute() -> None:
    """`mute marie 0` unmutes marie at once and leaves others muted."""
    mutes = MuteState().mute("marie", 10, now=0.0).mute("jo", 5, now=0.0)
    lifted = mutes.mute("marie", 0, now=60.0)
    assert not lifted.is_muted("marie", 60.0)
    assert lifted.until == {"jo": 300.0}


def test_lifting_everyone_lifts_every_mute() -> None:
    """`mute 0` (everyone) clears the per-person and per-room mutes too."""
    mutes = MuteState().mute("marie", 10, now=0.0).mute("room-x", 10, now=0.0)
    mutes = mutes.mute(EVERYONE, 10, now=0.0)
    assert mutes.mute(EVERYONE, 0, now=1.0) == MuteState()


def test_muting_again_replaces_the_end_time() -> None:
    """A second mute is 'N minutes from now', even when that is sooner than the first."""
    mutes = MuteState().mute("marie", 60, now=0.0).mute("marie", 1, now=30.0)
    assert mutes.until == {"marie": 90.0}


@pytest.mark.parametrize("minutes", [-1.0, math.nan, math.inf, 1e308, MAX_MINUTES + 0.5])
def test_bad_minutes_are_a_usage_error(minutes: float) -> None:
    """Negative, NaN, infinite or past-a-year minutes are refused with the usage code."""
    with pytest.raises(UsageError) as info:
        MuteState().mute("marie", minutes, now=0.0)
    assert info.value.code == "usage"


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_any_mute_ends_at_a_time_a_clock_can_show_or_is_refused(minutes: float) -> None:
    """Any minutes: a usage error, or an end `time.localtime` formats; up to a year is taken."""
    now = 1_700_000_000.0
    try:
        mutes = MuteState().mute("marie", minutes, now=now)
    except UsageError as exc:
        assert exc.code == "usage"
        assert not 0 <= minutes <= MAX_MINUTES
        return
    assert 0 <= minutes <= MAX_MINUTES
    for end in mutes.until.values():
        time.strftime("%H:%M", time.localtime(end))


def test_a_person_is_covered_by_their_own_their_rooms_or_everyones_mute() -> None:
    """Something from marie in room-x is muted if marie, room-x or everyone is muted."""
    assert MuteState().mute("marie", 1, 0.0).covers("marie", "room-x", 30.0)
    assert MuteState().mute("room-x", 1, 0.0).covers("marie", "room-x", 30.0)
    assert MuteState().mute(EVERYONE, 1, 0.0).covers("marie", "room-x", 30.0)
    assert not MuteState().mute("room-y", 1, 0.0).covers("marie", "room-x", 30.0)
    assert not MuteState().mute("jo", 1, 0.0).covers("marie", None, 30.0)


def test_a_local_post_source_can_be_muted() -> None:
    """Local posts are mutable (the original's post was not)."""
    mutes = MuteState().mute(local_key("ci"), 5, now=0.0)
    assert mutes.covers(local_key("ci"), None, 299.0)
    assert not mutes.covers(local_key("ci"), None, 300.0)


def test_ends_at_is_the_latest_end_among_covering_mutes() -> None:
    """Covered by two mutes, the hold ends when the later one does; expired ones do not count."""
    mutes = MuteState().mute("marie", 5, 0.0).mute("room-x", 10, 0.0).mute(EVERYONE, 1, 0.0)
    assert mutes.ends_at("marie", "room-x", 30.0) == 600.0
    assert mutes.ends_at("marie", None, 30.0) == 300.0
    assert mutes.ends_at("marie", None, 300.0) is None
    assert mutes.ends_at("jo", None, 60.0) is None


def test_active_and_pruned_keep_only_mutes_in_force() -> None:
    """Expired entries disappear from active() and pruned() at exactly their end."""
    mutes = MuteState().mute("marie", 1, 0.0).mute("jo", 2, 0.0)
    assert mutes.active(60.0) == {"jo": 120.0}
    assert mutes.pruned(60.0) == MuteState({"jo": 120.0})
    assert mutes.pruned(120.0) == MuteState()
