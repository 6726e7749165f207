"""`crosstalk status` shows how late the daemon's event loop has been, as the daemon measured."""

from __future__ import annotations

import time

from crosstalk.cli.cmd_status import loop_text


def test_the_loop_line_names_the_worst_lag_its_time_and_the_resolution() -> None:
    """Never late says so; a lag shows in milliseconds at its local time of day."""
    assert loop_text({"worst_lag_s": 0.0, "worst_lag_at": None, "resolution_s": 0.625}) == (
        "never late (measured every 0.625 s)"
    )
    at = time.mktime((2026, 12, 6, 1, 2, 3, 0, 0, -1))
    assert loop_text({"worst_lag_s": 0.0521, "worst_lag_at": at, "resolution_s": 0.625}) == (
        "worst lag 52 ms at 01:02:03 (measured every 0.625 s)"
    )
