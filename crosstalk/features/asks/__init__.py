"""Asks that end without an answer: the asker tells the room, the receiver's notice goes."""

from crosstalk.features.asks.ops import plug
from crosstalk.features.feature import Feature

FEATURE = Feature("asks", plug)
