"""Named rooms: create, invite, accept, decline, leave, kick (with a new key epoch), list."""

from crosstalk.features.feature import Feature
from crosstalk.features.rooms.ops import plug

FEATURE = Feature("rooms", plug)
