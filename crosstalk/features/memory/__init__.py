"""Room memory: facts, tasks and decisions every member replicates, and the working set."""

from crosstalk.features.feature import Feature
from crosstalk.features.memory.ops import plug

FEATURE = Feature("memory", plug)
