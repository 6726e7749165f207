"""Pairing in the simulation: two sim people read four words to each other, through the real flow.

In some seeds (``{seed}/pairing``: :func:`plan`) the first pair of the scenario is made the way
people make it, not set up directly (tests/sim/client.py ``pair``): the inviter's client runs
``room_new`` on its daemon's control socket and reads the invite line; the code, said aloud,
reaches the joiner's client, which runs ``room_join``. The two daemons meet in a slot of the sim
relay and run the SPAKE2 exchange (``crosstalk.actors.pairing``), then the inviter creates the
room of two and the joiner accepts it. With one fault on the way, drawn from the seed:

* ``drop``: the relay drops one side's connection a seeded number of scheduler steps after the
  code is said (mid-exchange: its pairing actor attaches to the slot again, probes
  ``pairing.reattached`` and ``pairing.restarted``, or a request of the flow fails);
* ``wrong_word``: the joiner mishears one word (both must fail ``wrong_words``, adopting nothing);
* ``racer``: a third node joins with the same code at the same moment (one join takes the slot;
  the other is refused; whoever won is paired with the inviter).

A failed attempt is tried again, as people would, with a new code and no fault (``pairing:retry``
in the coverage); after :data:`ATTEMPTS` the pair is set up directly so the workload still runs.
The ``pairing`` checker (tests/sim/check_door.py) then asks that both ends of every pairing hold
the same room with the same key, and that nothing half-made remains.
"""

from __future__ import annotations

import random
from typing import Any

import trio

from crosstalk.core.words import WORDS
from tests.sim.client import pair, run_one
from tests.sim.world import Node, World

FAULTS = ("none", "drop", "wrong_word", "racer")
ATTEMPTS = 3
SHARE = 0.4  # of seeds whose first pair is made through the real flow
DROP_STEPS = 150  # a pairing takes about this many scheduler steps from the code to the end


def plan(seed: int, nodes: tuple[str, ...]) -> tuple[str, str | None] | None:
    """The seed's pairing: (fault, racer) for the scenario's first pair, or None (set up
    directly). Drawn from a stream of its own, so no other draw moves."""
    rng = random.Random(f"{seed}/pairing")
    if rng.random() >= SHARE:
        return None
    fault = rng.choice(FAULTS)
    return fault, (rng.choice(nodes[2:]) if fault == "racer" and len(nodes) > 2 else None)


async def pair_for_real(world: World, a: Node, b: Node, fault: str, racer: Node | None) -> None:
    """``a`` invites ``b`` through ``room_new``/``room_join``, with ``fault`` on the first
    attempt; tried again without it until paired (then set up directly, see the module doc)."""
    for attempt in range(ATTEMPTS):
        if attempt:
            world.count("pairing:retry")
        if await _attempt(world, a, b, fault if attempt == 0 else "none", racer):
            world.history.add("world", "pairing", "ok", {"a": a.name, "b": b.name,
                                                         "fault": fault, "attempt": attempt}, None)
            return
    world.history.add("world", "pairing", "fail", {"a": a.name, "b": b.name, "fault": fault},
                      None)
    await pair(world, a, b)


async def _attempt(world: World, a: Node, b: Node, fault: str, racer: Node | None) -> bool:
    """One pairing; True when ``a`` and ``b`` both say they joined the same room."""
    world.count(f"pairing:{fault}")
    said, heard = trio.open_memory_channel[str](1)
    end, ended = trio.open_memory_channel[None](3)
    results: dict[str, tuple[str, Any]] = {}

    async def inviter() -> None:
        async with said:
            def read_out(record: dict[str, Any]) -> None:
                if "invite" in record:
                    said.send_nowait(record["invite"])
            results[a.name] = await run_one(world, a, "room_new", {}, -1, on_record=read_out)
        end.send_nowait(None)

    async def joiner(node: Node, code: str) -> None:
        results[node.name] = await run_one(world, node, "room_join", {"code": code}, -1)
        if node is not b:
            end.send_nowait(None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(inviter)
        try:
            code = await heard.receive()
        except trio.EndOfChannel:
            return False  # the inviter failed before it had a code to show
        racing = fault == "racer" and racer is not None
        if racing:
            assert racer is not None
            nursery.start_soon(joiner, racer, code)
        if fault == "drop":
            nursery.start_soon(_drop_soon, world, a, b)
        await joiner(b, _mishear(code) if fault == "wrong_word" else code)
        for _ in range(1 + racing):  # the inviter (and the racer) end too
            await ended.receive()
        nursery.cancel_scope.cancel()  # a drop not yet made: the pairing is over
    return _joined_together(results.get(a.name), results.get(b.name))


async def _drop_soon(world: World, a: Node, b: Node) -> None:
    """Drop one side's relay connection a seeded number of scheduler steps after the code was
    said: the exchange runs in no virtual time, so steps, not seconds, put the drop inside it."""
    rng = world.entropy.stream("pairing-drop", "world")
    node = rng.choice((a, b))
    for _ in range(rng.randint(0, DROP_STEPS)):
        await trio.lowlevel.checkpoint()
    world.count("fault:pairing_drop")
    world.relay.drop(node.name)


def _mishear(code: str) -> str:
    """The code with its last word replaced by another of crosstalk's words."""
    head, _, last = code.rpartition("-")
    return f"{head}-{next(w for w in WORDS if w != last)}"


def _joined_together(mine: tuple[str, Any] | None, theirs: tuple[str, Any] | None) -> bool:
    if mine is None or theirs is None or mine[0] != "ok" or theirs[0] != "ok":
        return False
    return bool(mine[1].get("room")) and mine[1].get("room") == theirs[1].get("room")
