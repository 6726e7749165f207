"""Status: who this daemon is, its relay link, its sessions, its actors' health, and whatever
each feature shows in ``status``."""

from crosstalk.features.feature import Feature
from crosstalk.features.status.ops import plug

FEATURE = Feature("status", plug)
