"""Peers: who we share rooms with (``peers``), what we call them (``rename``), what they cost."""

from crosstalk.features.feature import Feature
from crosstalk.features.peers.ops import plug

FEATURE = Feature("peers", plug)
