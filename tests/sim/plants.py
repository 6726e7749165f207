"""Planted bugs: the world built with one deliberately broken piece, to prove a checker bites.

Each is world composition (a daemon's appliers or listeners list edited before it starts),
never a patch of a product global. ``PLANTS[name](scenario)`` gives the plants per node.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.sim.workload import Scenario
from tests.sim.world import Plant

PLANTS: dict[str, Callable[[Scenario], dict[str, list[Plant]]]] = {}
