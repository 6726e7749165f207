"""Retention: finished history leaves ``state.db`` after a while (``crosstalk prune``)."""

from crosstalk.features.feature import Feature
from crosstalk.features.retention.ops import plug

FEATURE = Feature("retention", plug)
