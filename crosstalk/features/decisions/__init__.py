"""Decisions announced to every member (issue 19 item 6), and ``decisions`` to list them."""

from crosstalk.features.decisions.ops import plug
from crosstalk.features.feature import Feature

FEATURE = Feature("decisions", plug)
