"""Identity: this home's keys, and ``secure`` to move their seeds into the OS keyring."""

from crosstalk.features.feature import Feature
from crosstalk.features.identity.ops import plug

FEATURE = Feature("identity", plug)
