"""One seed, start to end: setup, safety phase (faults on), heal, liveness phase, checkers."""

from __future__ import annotations

import hashlib
import random
import tempfile
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing

from crosstalk import sim_hooks
from crosstalk.actors.health import ActorState
from tests.sim import checkers, debuglog, determinism, pairing
from tests.sim.check_caught_up import LOOK, behind, still_behind
from tests.sim.client import client, pair, run_op
from tests.sim.faults import Fault, heal, run_faults, schedule
from tests.sim.plants import PLANTS
from tests.sim.snapshot import read_state
from tests.sim.workload import Scenario, generate, subset
from tests.sim.world import World

VIRTUAL_CAP = 4 * 3600.0  # a run that has not ended by then hangs: reported, not waited for
TWO_NODES = 0.2  # the share of generated seeds that run two relay nodes on NATS (two_nodes)
QUIET = 100.0  # healed virtual seconds before the final reads (link backoff caps at 30 s)


@attrs.define
class Outcome:
    seed: int
    digest: str
    failures: list[checkers.Failure]
    coverage: dict[str, int]
    profile: list[str]
    history: list[str] = attrs.field(repr=False)
    steps: int = 0


async def _main(world: World, scenario: Scenario, faults: list[Any],
                clock: trio.testing.MockClock, out: dict[str, Any],
                real: tuple[str, str | None] | None) -> None:
    world.install_hooks()
    rng = world.entropy.stream("downtime", "world")
    async with trio.open_nursery() as nursery:
        await nursery.start(world.relay.run)
        for node in world.nodes.values():
            nursery.start_soon(world.keep, node, lambda: rng.uniform(0.5, 20.0))
        for i, (a, b) in enumerate(scenario.pairs):
            if i == 0 and real is not None:
                racer = world.nodes[real[1]] if real[1] else None
                await pairing.pair_for_real(world, world.nodes[a], world.nodes[b], real[0], racer)
            else:
                await pair(world, world.nodes[a], world.nodes[b])
        world.faults_on = world.relay.faults_on = True
        start = trio.current_time()
        async with trio.open_nursery() as safety:
            safety.start_soon(run_faults, world, faults, start, clock)
            async with trio.open_nursery() as clients:
                for name, node in world.nodes.items():
                    mine = [a for a in scenario.actions if a.node == name]
                    clients.start_soon(client, world, node, mine, start)
            safety.cancel_scope.cancel()
        heal(world)
        world.history.add("world", "heal", "info", {}, None)
        await _liveness(world, out)
        nursery.cancel_scope.cancel()


async def _liveness(world: World, out: dict[str, Any]) -> None:
    """Healed: wait (looking twice whether every room caught up, before any client acts), read
    everything once more, let receipts travel, then look at every store."""
    await trio.sleep(QUIET - LOOK)
    first = {name: behind(node.home.database) for name, node in world.nodes.items()}
    await trio.sleep(LOOK)
    caught_up = {name: {"first": rooms,
                        "still": still_behind(rooms, behind(world.nodes[name].home.database))}
                 for name, rooms in first.items()}
    for node in world.nodes.values():
        determinism.NODE.set(node.name)
        await run_op(world, node, "read", {}, -1)
    await trio.sleep(30.0)
    for node in world.nodes.values():
        determinism.NODE.set(node.name)
        await run_op(world, node, "sent", {"limit": 1000}, -1)
        daemon, _ = await world.up(node)
        out[node.name] = await daemon.store.read(read_state)
        out[node.name]["caught_up"] = caught_up[node.name]
        out[node.name]["failed_actors"] = [h.name for h in daemon.supervisor.statistics()
                                           if h.state is ActorState.FAILED]
    determinism.NODE.set("world")


def run_seed(seed: int, *, keep: set[int] | None = None, plant: str | None = None,
             faults_keep: set[int] | None = None, scenario: Scenario | None = None,
             faults: list[Fault] | None = None, relay_nodes: int | None = None,
             replay_window: int | None = None) -> Outcome:
    """Run ``seed`` (only the actions in ``keep``, if given) and check it. A hand-written case
    passes its own ``scenario`` and ``faults`` instead of the seed's (the seed still drives
    scheduling), and may give the relay a smaller ``replay_window``. ``relay_nodes`` (1 or 2)
    overrides the seed's choice of one relay or two relay nodes on NATS."""
    full = scenario if scenario is not None else generate(seed)
    picked = subset(full, keep)
    # The horizon comes from the whole scenario: a shrunk action list keeps the seed's faults
    # where they were (dropping the last action must not move every fault).
    horizon = max((a.at for a in full.actions), default=0.0)
    profile, scheduled = schedule(seed, picked.nodes, horizon)
    if faults is not None:
        profile, scheduled = {f.kind for f in faults}, faults
    faults = scheduled
    if faults_keep is not None:
        faults = [f for f in faults if f.index in faults_keep]
    entropy = determinism.activate(seed)
    canary = entropy.canary
    try:
        with debuglog.daemon_logs(), tempfile.TemporaryDirectory(prefix=f"sim{seed}-") as tmp:
            plants = PLANTS[plant](picked, seed) if plant else {}
            if relay_nodes is None:
                relay_nodes = two_nodes(seed) if scenario is None else 1
            world = World(seed, len(picked.nodes), Path(tmp), entropy, plants=plants,
                          leaky_relay=plant == "leaky_relay",
                          undo_on_hangup=plant == "undo_on_hangup", relay_nodes=relay_nodes)
            world.relay.commit_faults = scenario is None
            world.relay.replay_window = replay_window
            clock = trio.testing.MockClock(autojump_threshold=0)
            states: dict[str, Any] = {}
            failures: list[checkers.Failure] = []
            try:
                # A generated scenario may pair its first two for real (tests/sim/pairing.py);
                # a hand-written case (tests/sim/placed.py, test_scenarios) keeps its set-up.
                real = pairing.plan(seed, picked.nodes) if scenario is None else None
                trio.run(_bounded, world, picked, faults, clock, states, real, clock=clock)
            except trio.TooSlowError:
                failures.append(checkers.Failure("stuck", "the run did not end in virtual time"))
    finally:
        sim_hooks.install(None, None)
        determinism.deactivate()
    if states:
        failures += checkers.check_all(world, states)
    digest = hashlib.sha256(
        (world.history.digest() + canary.hexdigest() + world.relay.digest.hexdigest())
        .encode()
    ).hexdigest()[:16]
    return Outcome(seed, digest, failures, world.coverage, sorted(profile),
                   world.history.lines(), canary.steps)


def two_nodes(seed: int) -> int:
    """How many relays a generated seed runs on: two relay nodes on NATS in about one seed of
    five (TWO_NODES), drawn from a stream of the seed's own, so no other draw moves."""
    return 2 if random.Random(f"{seed}/relay-nodes").random() < TWO_NODES else 1


async def _bounded(world: World, scenario: Scenario, faults: list[Any],
                   clock: trio.testing.MockClock, out: dict[str, Any],
                   real: tuple[str, str | None] | None) -> None:
    with trio.fail_after(VIRTUAL_CAP):
        await _main(world, scenario, faults, clock, out, real)
