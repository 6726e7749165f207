"""The human line of ``crosstalk reserve``: granted, pending on its way, and pending because it
was decided on an incomplete memory (not final, with what it decided for now)."""

from __future__ import annotations

from typing import Any

from crosstalk.cli.cmd_memory import NOT_FINAL, said
from crosstalk.cli.cmd_reserve import answer_line

NOW = 1_800_000_000.0


def _reply(state: str, **extra: Any) -> dict[str, Any]:
    return {"id": "r0123456789", "paths": ["src/**"], "room": "work", "repo": "app",
            "until": NOW + 3600, "shared": False, "state": state, "why_pending": None,
            "provisional": None, **extra}


def test_a_grant_says_what_holds_until_when() -> None:
    """Final: the state, the paths, the repository, exclusive or shared, and the time left."""
    line = answer_line(_reply("granted"), NOW)
    assert line.startswith("granted: r0123456789 src/** in app (exclusive, until ")
    assert "(60 min left), room work)" in line


def test_a_reserve_the_relay_has_not_ordered_is_on_its_way() -> None:
    """Pending, undecided: nothing is said of the outcome."""
    line = answer_line(_reply("pending", until=None, why_pending="undecided"), NOW)
    assert line == ("pending: r0123456789 (src/**) is on its way to work; the relay has not "
                    "ordered it yet")


def test_a_reserve_decided_on_an_incomplete_memory_says_it_is_not_final() -> None:
    """Pending, memory_incomplete: what it decided for now, and that it is not final."""
    for provisional in ("granted", "refused"):
        reply = _reply("pending", why_pending="memory_incomplete", provisional=provisional)
        assert answer_line(reply, NOW) == (
            f"pending: r0123456789 (src/**) is {provisional} for now in work, {NOT_FINAL}")


def test_a_fact_or_task_write_on_an_incomplete_memory_says_so() -> None:
    """The fact and task writes' line: the outcome as it stands, unless it is not final."""
    final = {"outcome": "applied", "why_pending": None}
    assert said(final, "applied") == "applied"
    provisional = {"outcome": "pending", "why_pending": "memory_incomplete",
                   "provisional": "not_claimer"}
    assert said(provisional, "pending") == f"pending (not_claimer for now, {NOT_FINAL})"
