"""Two relay nodes on the NATS stand-in in the simulation (tests/sim/nats_relay.py)."""

from __future__ import annotations

from tests.sim.runner import run_seed, two_nodes


def test_about_one_generated_seed_in_five_runs_two_relay_nodes() -> None:
    """The choice is the seed's own draw: stable, about 20 %, and seed 21 (a regression seed
    of the node layer) is one of them."""
    chosen = [seed for seed in range(1, 301) if two_nodes(seed) == 2]
    assert 0.12 < len(chosen) / 300 < 0.28
    assert 21 in chosen and 39 in chosen and 2 not in chosen


def test_a_two_node_seed_passes_through_node_crashes_and_moves() -> None:
    """Seed 1 on two nodes: every checker holds while nodes crash and restart from the stream,
    a node's feed is late for a while, and daemons reconnect to the other node."""
    outcome = run_seed(1, relay_nodes=2)
    assert outcome.failures == []
    reached = outcome.coverage
    for key in ("relay:two_nodes", "fault:node_crash", "relay:moved_node",
                "check:delivery", "check:roster"):
        assert reached.get(key), (key, reached)
