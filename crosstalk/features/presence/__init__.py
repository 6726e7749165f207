"""Peer sessions: each daemon publishes its live agent sessions to the people it shares rooms
with (issue 19 item 9), so ``peers`` shows them and ``send ben/SESSION`` has a name to use."""

from crosstalk.features.feature import Feature
from crosstalk.features.presence.ops import plug

FEATURE = Feature("presence", plug)
