"""Pairing: ``room new``/``room join`` (four words, a room of two) and ``link`` (six words, this
identity on a new machine), both over the same SPAKE2 exchange (``crosstalk.core.pairing``)."""

from crosstalk.features.feature import Feature, Plugs
from crosstalk.features.pairing import link, ops


def plug(daemon: link.Host) -> Plugs:
    """The room-pairing ops and the link ops (``link.Host`` asks for what both use)."""
    return Plugs(ops=ops.plug(daemon).ops + link.plug(daemon).ops)


FEATURE = Feature("pairing", plug)
