"""BUGGIFY points for the deterministic simulation (tests/sim); inert in production.

A product seam that is dangerous to get wrong (the window after a COMMIT and before its reply,
for one) asks ``buggify(name)``. Outside the simulation no chooser is installed, so the answer is
a constant ``False`` and the branch behind it never runs. The simulation installs a chooser drawn
from its seed (FoundationDB's scheme: each point switched on or off once per run, then firing with
a fixed chance) and a handler that carries out the fault (a crash of the node whose task hit the
point, or a delay in virtual time).

``handoff(name)`` marks a hand-off between actors (a channel send): in the simulation it may be
late. ``probe(name)`` names an important branch: the simulation counts how often its seeds reach
each one, so a branch no seed reaches shows up (a planted bug there would survive every seed).

This module is a leaf: it imports nothing, so any layer (even the sans-IO cores) may call it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

Chooser = Callable[[str], bool]
Handler = Callable[[str], Awaitable[None]]
Counter = Callable[[str], None]

_chooser: Chooser | None = None
_handler: Handler | None = None
_counter: Counter | None = None


def buggify(name: str) -> bool:
    """Whether the fault point ``name`` fires now (always False unless the sim installed one)."""
    return _chooser is not None and _chooser(name)


async def fire(name: str) -> None:
    """Carry out the fault at point ``name`` (call it only after ``buggify(name)`` said True)."""
    if _handler is not None:
        await _handler(name)


async def handoff(name: str) -> None:
    """A hand-off between actors: the simulation may make it late (``fire`` carries it out)."""
    if _chooser is not None and _chooser(name):
        await fire(name)


def probe(name: str) -> None:
    """The branch ``name`` was reached (counted in the simulation, nothing otherwise)."""
    if _counter is not None:
        _counter(name)


def install(
    chooser: Chooser | None, handler: Handler | None, counter: Counter | None = None
) -> None:
    """Install (or, with None, remove) the simulation's chooser, fault handler and counter."""
    global _chooser, _handler, _counter
    _chooser, _handler, _counter = chooser, handler, counter
