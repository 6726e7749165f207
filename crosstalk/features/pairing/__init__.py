"""Pairing: ``room new``/``room join`` (four words, a room of two) and ``link`` (six words, this
identity on a new machine), both over the same SPAKE2 exchange (``crosstalk.core.pairing``)."""

from typing import Protocol

from crosstalk.features.feature import Feature, Plugs
from crosstalk.features.pairing import link, ops


class Host(link.Host, ops.Host, Protocol):
    """What both ask for."""


def plug(daemon: Host) -> Plugs:
    """The room-pairing ops and the link ops; both run pairing actors (``ops.PAIRINGS``)."""
    return Plugs(ops=ops.plug(daemon).ops + link.plug(daemon).ops, spawns=(ops.PAIRINGS,))


FEATURE = Feature("pairing", plug)
