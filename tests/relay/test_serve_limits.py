"""`relay serve`'s limit options become the core's limits, and impossible ones are refused;
CROSSTALK_RELAY_PING sets the shell's pings, CROSSTALK_RELAY_NODE_BEAT a node's presence beat,
CROSSTALK_RELAY_HELLO_TIMEOUT the time to say hello."""

from __future__ import annotations

import inspect

import attrs
import pytest

from crosstalk.cli.cmd_relay import serve
from crosstalk.errors import UsageError
from crosstalk.paths import positive_seconds
from relay.limits import RelayConfig
from relay.main import (
    ServeOptions,
    relay_config,
    shell_timings,
    with_hello_timeout,
)
from relay.server import ShellTimings


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


def test_the_cli_defaults_are_the_cores() -> None:
    """`relay serve`'s limit options default to the core's limits (written out in the CLI,
    which must not import the relay to parse)."""
    defaults = {name: p.default for name, p in inspect.signature(serve).parameters.items()}
    core = RelayConfig()
    assert (defaults["max_connections_per_address"], defaults["max_connections_per_identity"],
            defaults["max_connections"], defaults["slot_rate"],
            defaults["max_slots_per_address"], defaults["slot_work_bits"]) == (
        core.max_per_source, core.max_per_identity, core.max_authenticated, core.slot_rate,
        core.max_slots_per_source, core.slot_work_bits)


@pytest.mark.parametrize(("raw", "ping"), [("3", 3.0), ("0.5", 0.5), (None, 20.0), ("", 20.0),
                                            ("0", 20.0), ("-1", 20.0), ("nan", 20.0), ("x", 20.0)])
def test_crosstalk_relay_ping_sets_the_ping_interval_and_timeout(raw: str | None,
                                                                 ping: float) -> None:
    """A positive CROSSTALK_RELAY_PING is both the ping interval and its timeout; anything else
    keeps the 20 s defaults."""
    timings = shell_timings(raw)
    assert (timings.ping_interval, timings.ping_timeout) == (ping, ping)
    assert attrs.evolve(timings, ping_interval=20.0, ping_timeout=20.0) == ShellTimings()


def test_a_seconds_variable_is_a_positive_number_or_nothing() -> None:
    """CROSSTALK_RELAY_NODE_BEAT (and the ping) take a positive number of seconds, else the
    default applies."""
    texts = ("2", "0.25", None, "", "0", "-3", "nan", "inf", "x")
    assert [positive_seconds(raw) for raw in texts] == [
        2.0, 0.25, None, None, None, None, None, None, None]


def test_crosstalk_relay_hello_timeout_sets_only_the_hello_timeout() -> None:
    """A positive CROSSTALK_RELAY_HELLO_TIMEOUT replaces the config's hello timeout and nothing
    else; anything else keeps the config as it was."""
    config = relay_config(ServeOptions(max_per_source=7))
    assert with_hello_timeout(config, "2") == attrs.evolve(config, hello_timeout=2.0)
    assert with_hello_timeout(config, None) is config
    assert with_hello_timeout(config, "0") is config
