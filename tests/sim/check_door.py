"""``hangup``: an op whose client hung up mid-request took whole or not at all.

The client of such an op (tests/sim/door.py) never learns its outcome: the history says
``info``. The daemon must still have done all of it or none of it. For a send (or an answer)
the evidence is its text, unique per action (``m<index>``, ``a<index>``): it *took* when the
sender's outbox holds it (the ``delivery`` checker then demands it reach every member, as for
any message of the outbox); it did *not* when no store holds it. Anything else is half made: a
member holds the message while the sender's outbox does not (a daemon that undid the op it could
not answer, after the relay had it). The coverage counts which it was (``check:hangup:took``,
``check:hangup:not_taken``), so a soak shows both outcomes are reached.
"""

from __future__ import annotations

from typing import Any

from tests.sim.truth import Failure, Truth
from tests.sim.world import World

PREFIX = {"send": "m", "answer": "a"}


def check_hangups(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    del truth
    out: list[Failure] = []
    for e in world.history.events:
        if e.phase != "info" or e.result != "hung up" or e.op not in PREFIX:
            continue
        text = f"{PREFIX[e.op]}{e.index}"
        sender = world.nodes[e.node].fp
        took = any(m.get("text") == text for m in states[e.node]["sent"].values())
        held = sorted(name for name, s in states.items() if name != e.node and any(
            h["sender"] == sender and h["text"] == text for h in s["held"].values()))
        world.count("check:hangup:" + ("took" if took else "not_taken"))
        if held and not took:
            out.append(Failure("hangup", f"{e.node} {e.op} {text} (its client hung up) reached "
                               f"{', '.join(held)} but is not in {e.node}'s outbox: half made"))
    return out
