"""Room membership: every member's roster follows the relay's, checked against signatures."""

from crosstalk.features.feature import Feature
from crosstalk.features.membership.ops import plug

FEATURE = Feature("membership", plug)
