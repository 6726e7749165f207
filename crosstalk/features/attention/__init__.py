"""Attention: the gate that decides what reaches which session (``trust``, ``mute``,
``attention``), and the session and notice ops the hooks call."""

from crosstalk.features.attention.ops import plug
from crosstalk.features.feature import Feature

FEATURE = Feature("attention", plug)
