"""Room membership: every member's roster is the one the room's signed membership history gives
(:mod:`crosstalk.wire.chain`), whatever the relay's rows say; and the keys owed to joiners."""

from crosstalk.features.feature import Feature
from crosstalk.features.membership.ops import plug

FEATURE = Feature("membership", plug)
