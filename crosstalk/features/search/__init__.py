"""Search (issue 38 item 1): what this identity holds, by words, through an FTS5 index."""

from crosstalk.features.feature import Feature
from crosstalk.features.search.ops import plug

FEATURE = Feature("search", plug)
