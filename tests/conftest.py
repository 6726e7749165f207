"""Shared fixtures."""

from __future__ import annotations

import os

from hypothesis import settings

# Shared, noisy machines: hypothesis deadlines would make timing-dependent failures.
settings.register_profile("crosstalk", deadline=None)
settings.load_profile("crosstalk")
os.environ.pop("CROSSTALK_HOME", None)
os.environ.pop("CROSSTALK_RELAY", None)
