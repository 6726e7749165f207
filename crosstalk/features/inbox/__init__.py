"""The inbox push: what the gate surfaced, pushed into each Claude Code session's inbox socket."""

from crosstalk.features.feature import Feature
from crosstalk.features.inbox.ops import plug

FEATURE = Feature("inbox", plug)
