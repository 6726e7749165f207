"""`relay serve`'s limit options become the core's limits, and impossible ones are refused."""

from __future__ import annotations

import pytest

from crosstalk.errors import UsageError
from relay.main import ServeOptions, relay_config


def test_the_limit_options_reach_the_core() -> None:
    """Each connection and slot option sets its limit in the core's config."""
    config = relay_config(ServeOptions(max_per_source=7, max_per_identity=3, max_authenticated=50,
                                       slot_rate=2.0, max_slots_per_source=9, slot_work_bits=5))
    assert (config.max_per_source, config.max_per_identity, config.max_authenticated,
            config.slot_rate, config.max_slots_per_source, config.slot_work_bits) == (
        7, 3, 50, 2.0, 9, 5)


@pytest.mark.parametrize("bad", [
    ServeOptions(max_per_source=0), ServeOptions(max_per_identity=0),
    ServeOptions(max_authenticated=0), ServeOptions(max_slots_per_source=0),
    ServeOptions(slot_rate=-1.0), ServeOptions(slot_work_bits=25), ServeOptions(slot_work_bits=-1),
])
def test_impossible_limits_are_a_usage_error(bad: ServeOptions) -> None:
    """A cap below 1, a negative rate or more work than clients do is refused at start."""
    with pytest.raises(UsageError):
        relay_config(bad)
