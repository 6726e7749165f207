"""Threads (issue 19 item 8): messages that belong together, shown in order, closed with a
summary that every participant is told."""

from crosstalk.features.feature import Feature
from crosstalk.features.threads.ops import plug

FEATURE = Feature("threads", plug)
