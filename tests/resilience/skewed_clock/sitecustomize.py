"""A wrong wall clock for one process tree (scenario 8), with no libfaketime on the machine.

Put this directory first on ``PYTHONPATH`` and set ``CROSSTALK_TEST_CLOCK_SKEW`` (seconds): every
Python process started with that environment (the CLI, and the daemon it starts) then reads
``time.time()`` that many seconds off. Monotonic clocks (what Trio's timeouts use) are untouched,
as on a real machine whose wall clock is wrong.
"""

from __future__ import annotations

import os
import time

_SKEW = float(os.environ.get("CROSSTALK_TEST_CLOCK_SKEW", "0") or 0)

if _SKEW:
    _real_time = time.time

    def _skewed_time() -> float:
        return _real_time() + _SKEW

    time.time = _skewed_time
