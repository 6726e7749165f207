"""Human `crosstalk mute`: the list of mutes, a mute's end with its date when not today, and
the truth about someone a mute on everyone still holds."""

from __future__ import annotations

import time

from crosstalk.cli.cmd_trust import mute_text, mutes_text, until_text

NOW = time.mktime((2025, 3, 4, 10, 0, 0, 0, 0, -1))  # Tuesday 4 March 2025, 10:00 local


def test_an_end_today_is_a_time_and_another_day_has_its_date() -> None:
    """50 hours on is not "until 12:00": it is Thursday's 12:00."""
    assert until_text(NOW + 3600, now=NOW) == "11:00"
    assert until_text(NOW + 50 * 3600, now=NOW) == "Thu 6 Mar 12:00"
    assert until_text(NOW + 366 * 24 * 3600, now=NOW) == "Thu 5 Mar 2026 10:00"


def test_bare_mute_lists_each_mute_with_its_end() -> None:
    """One line per mute; none: says nobody is muted."""
    reply = {"mutes": [{"who": "ben", "until": NOW + 600}, {"who": "everyone",
                                                             "until": NOW + 50 * 3600}]}
    assert mutes_text(reply, now=NOW).split("\n") == [
        "  ben              until 10:10",
        "  everyone         until Thu 6 Mar 12:00",
    ]
    assert mutes_text({"mutes": []}, now=NOW) == "Nobody is muted."


def test_unmuting_someone_everyone_is_muted_for_says_they_are_still_held() -> None:
    """`mute ana 0` under `mute all`: not "not muted"."""
    reply = {"muted": ["everyone"], "until": NOW + 1800, "by": ["everyone"]}
    shown = mute_text("ana", reply, now=NOW)
    assert "not muted" not in shown.replace("not muted by name", "")
    assert "everyone" in shown and "10:30" in shown and "mute all 0" in shown
    assert mute_text("ana", {"muted": [], "until": None, "by": []}, now=NOW) == "ana: not muted"
    own = {"muted": ["ana"], "until": NOW + 600, "by": ["ana"]}
    assert mute_text("ana", own, now=NOW) == "ana: muted until 10:10"
