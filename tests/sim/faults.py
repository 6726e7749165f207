"""Faults: a profile (which kinds are on) and a schedule, both drawn from the seed.

Kinds: ``drop`` (the relay ends a node's connections, or everyone's), ``delay`` (a node's link
gets slow for a while, FIFO), ``cut`` (the relay ends a node's connections and refuses its
reconnects for a while), ``freeze`` (the relay stops processing; frames wait),
``relay_crash`` (the relay dies and restarts from its storage), ``daemon_crash`` (kill -9 of a
node; it restarts from its SQLite file), ``clock_jump`` (the whole world sleeps and wakes: every
timer fires at once) and ``skew`` (one node's wall clock steps, possibly backwards). BUGGIFY
points add crashes after a commit (a node's, or the relay's while it commits a batch:
tests/sim/net.py).

``lie``: the relay as an adversary about membership (``SimRelay.lie``), for a while, towards one
node: ``readd`` puts a removed member back in the relay's rows (as an operator editing its
database would; the member's daemon then finds itself joined and names itself in the room),
``replay`` shows an old statement of the room's history again as if it were the next,
``reorder`` hands a fetched history out of order. Drawn from a stream of its own, so adding it
moved no other kind's schedule.

``actor_crash`` (only where a case schedules it: tests/sim/placed.py): an actor of the target
node crashes at each of the next ``size`` passes through ``handoff.link_to_router``, as a bug in
it would; its supervisor restarts it. That actor is the relay link, and the point lies after it
committed a batch of arrivals and before it announced them to the router.

``half_open`` (its own stream): for a while one node's link carries nothing either way, though
both ends still hold it open, and its reconnects are refused: each side's heartbeat must notice
(the relay shell's drops the link: ``relay.ping_unanswered``).

``busy`` (its own stream): for a while the relay turns about every other post away with
``backlog_full``, as it does under load; the sender keeps the post queued and tries again.

``disk_full`` (its own stream too): for a while every write at one node fails as SQLite fails on
a full disk; then writes succeed again. With the BUGGIFY points ``store.commit_fails`` (a COMMIT
raising an I/O error) and ``store.slow_fsync`` (a commit that returns late) these are the storage
faults: nothing a reply called stored may be lost, and the daemon must recover. ``commit_fails``
(placed only, tests/sim/placed.py) makes every COMMIT at one node fail for a while.

Two more, drawn in the world (tests/sim/world.py), each from a stream of its own: a hand-off
between actors (``sim_hooks.handoff``: link → router, router → room, room → its sender, router →
membership, room → gate) is sometimes late, and a client sometimes hangs up on the control socket
mid-request (``hang_up``, tests/sim/door.py: the op takes whole or not at all, and a client
tries again an op the design makes safe to repeat; the checkers then see it applied once).
"""

from __future__ import annotations

import random

import attrs
import trio
import trio.testing

from tests.sim.world import World

KINDS = ("drop", "delay", "cut", "freeze", "relay_crash", "daemon_crash", "clock_jump", "skew")
LIES = ("readd", "replay", "reorder")


@attrs.frozen
class Fault:
    index: int
    at: float
    kind: str
    target: str | None
    size: float  # seconds (span, delay, jump) or skew


def schedule(seed: int, nodes: tuple[str, ...], horizon: float) -> tuple[set[str], list[Fault]]:
    """The seed's fault profile and its faults over ``[0, horizon]`` virtual seconds."""
    rng = random.Random(f"{seed}/faults")
    profile = {k for k in KINDS if rng.random() < 0.5}
    faults: list[Fault] = []
    for kind in sorted(profile):
        for _ in range(rng.randint(1, 4)):
            target = rng.choice(nodes) if kind != "freeze" and rng.random() < 0.8 else None
            size = {
                "delay": rng.uniform(0.01, 1.5), "cut": rng.uniform(1, 30),
                "freeze": rng.uniform(0.5, 15), "relay_crash": rng.uniform(0.1, 8),
                "clock_jump": rng.uniform(5, 120), "skew": rng.uniform(-60, 60),
            }.get(kind, 0.0)
            faults.append(Fault(0, round(rng.uniform(0, horizon), 3), kind, target, size))
    lies = random.Random(f"{seed}/lies")
    if lies.random() < 0.5:
        profile.add("lie")
        for _ in range(lies.randint(1, 3)):
            mode = float(LIES.index(lies.choice(LIES)))
            faults.append(Fault(0, round(lies.uniform(0, horizon), 3), "lie",
                                lies.choice(nodes), mode))
    for stream, kind, on_nodes, sizes in WINDOWS:
        faults += _windows(random.Random(f"{seed}/{stream}"), kind, nodes if on_nodes else (),
                           horizon, sizes, profile)
    faults.sort(key=lambda f: (f.at, f.kind))
    return profile, [attrs.evolve(f, index=i) for i, f in enumerate(faults)]


# Fault kinds on in half the seeds, each from a stream of its own (so turning one on moves no
# other kind's draws): its stream's name, the kind, whether each window is at one node (else the
# whole relay), and how long a window lasts, in seconds.
WINDOWS = (("disks", "disk_full", True, (0.5, 20.0)), ("half-open", "half_open", True, (5.0, 40.0)),
           ("busy", "busy", False, (2.0, 20.0)))


def _windows(rng: random.Random, kind: str, nodes: tuple[str, ...], horizon: float,
             sizes: tuple[float, float], profile: set[str]) -> list[Fault]:
    """One to three windows of ``kind`` over ``[0, horizon]`` if ``rng`` turns it on (then it is
    added to ``profile``); each at one of ``nodes``, or at no node if there are none."""
    if rng.random() >= 0.5:
        return []
    profile.add(kind)
    out = []
    for _ in range(rng.randint(1, 3)):
        at = round(rng.uniform(0, horizon), 3)
        target = rng.choice(nodes) if nodes else None
        out.append(Fault(0, at, kind, target, rng.uniform(*sizes)))
    return out


async def _for_a_while(world: World, fault: Fault) -> None:
    relay = world.relay
    if fault.kind == "delay" and fault.target:
        relay.delays[fault.target] = fault.size
        await trio.sleep(20)
        relay.delays.pop(fault.target, None)
    elif fault.kind == "cut" and fault.target:
        relay.refuse(fault.target)
        relay.drop(fault.target)
        await trio.sleep(fault.size)
        relay.mend(fault.target)
    elif fault.kind == "half_open" and fault.target:
        relay.cut(fault.target)
        await trio.sleep(fault.size)
        relay.mend(fault.target)
    elif fault.kind == "busy":
        relay.busy = True
        await trio.sleep(fault.size)
        relay.busy = False
    elif fault.kind == "freeze":
        relay.freeze()
        await trio.sleep(fault.size)
        relay.thaw()
    elif fault.kind == "relay_crash":
        relay.crash()
        await trio.sleep(fault.size)
        relay.restart()
    elif fault.kind == "lie" and fault.target:
        mode = LIES[int(fault.size)]
        fp = world.nodes[fault.target].fp
        relay.lie(fault.target, fp, mode)
        await trio.sleep(20)
        relay.stop_lying(fault.target)


async def run_faults(
    world: World, faults: list[Fault], start: float, clock: trio.testing.MockClock
) -> None:
    """Carry out ``faults`` at their times (the caller cancels this when the safety phase ends)."""
    async with trio.open_nursery() as nursery:
        for fault in faults:
            await trio.sleep_until(start + fault.at)
            world.count(f"fault:{fault.kind}")
            world.history.add("world", f"fault:{fault.kind}", "info",
                              {"target": fault.target, "size": round(fault.size, 3)}, None)
            if fault.kind == "drop":
                world.relay.drop(fault.target)
            elif fault.kind == "daemon_crash" and fault.target:
                world.crash(world.nodes[fault.target], why="scheduled")
            elif fault.kind in ("disk_full", "commit_fails") and fault.target:
                # Every write (or every COMMIT) at the node fails until then; then they succeed.
                window = world.disk_full if fault.kind == "disk_full" else world.commit_fails
                until = trio.current_time() + fault.size
                window[fault.target] = max(window.get(fault.target, 0), until)
            elif fault.kind == "actor_crash" and fault.target:
                world.crash_at[fault.target] = ("handoff.link_to_router", int(fault.size))
            elif fault.kind == "clock_jump":
                clock.jump(fault.size)
            elif fault.kind == "skew" and fault.target:
                skew = world.entropy.skew
                skew[fault.target] = skew.get(fault.target, 0.0) + fault.size
            else:
                nursery.start_soon(_for_a_while, world, fault)


def heal(world: World) -> None:
    """Every fault stops: links fast and open, the relay thawed and up, no more BUGGIFY."""
    relay = world.relay
    world.faults_on = False
    world.disk_full.clear()
    world.commit_fails.clear()
    world.crash_at.clear()
    relay.faults_on = False
    relay.delays.clear()
    relay.mend()
    relay.busy = False
    for node in list(relay.lies):
        relay.stop_lying(node)
    if relay.frozen:
        relay.thaw()
    if relay.down:
        relay.restart()
