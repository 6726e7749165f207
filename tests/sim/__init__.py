"""Deterministic simulation of the whole system (issue #18; design: reference/simulation.md).

Import :mod:`tests.sim.determinism` before anything from ``crosstalk`` or ``relay``: several
product defaults (``Gate(clock=time.time)``, ``RoomActor(randomness=nacl.utils.random)``) are
bound at import time, so the seams must be in place first. This package's ``__init__`` does it.
"""

from tests.sim import determinism as _determinism  # noqa: F401  (installs the seams first)
