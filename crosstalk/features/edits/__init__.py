"""Edit awareness (issue 37): which files each session's agent wrote lately, told only to rooms
that share the repository, so an agent hears of a clash before it edits."""

from crosstalk.features.edits.ops import plug
from crosstalk.features.feature import Feature

FEATURE = Feature("edits", plug)
