"""The storage faults' invariants (a full disk, a failed COMMIT, a slow fsync; tests/sim/faults.py).

* ``durable``: nothing a reply called stored is lost. Every send (or answer) answered ``ok`` is
  still in its sender's outbox at the end (after every fault and restart), and every task or fact
  added ``ok`` and applied (not ``pending``: the relay may still refuse that, e.g. in a room it
  has not created yet) is still in the adder's memory of a room it is still in.
* ``once``: an op the daemon refused changed nothing. The client tries a send refused
  ``storage_full`` again (as the message asks), so a refusal that had in fact queued the message
  shows as two messages with the one text (each send action's text is unique) at a receiver,
  or as two rows with that text in the sender's outbox (the one a refusal left may never go out).
* ``recovered``: the daemon recovers. After healing, no actor of any node is left FAILED (a
  full disk made an actor crash on every restart until the supervisor gave up on it for good),
  and the final reads of the liveness phase succeeded.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from tests.sim.truth import Failure, Truth
from tests.sim.world import World


def check_durable(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    del truth
    out: list[Failure] = []
    for e in world.history.events:
        if e.phase != "ok" or not isinstance(e.result, dict) or not e.result.get("id"):
            continue
        state = states[e.node]
        if e.op in ("send", "answer"):
            world.count("check:durable")
            if e.result["id"] not in state["sent"]:
                out.append(Failure("durable", f"{e.node} {e.op} {e.result['id'][:8]} was "
                                   "answered ok, then lost from its outbox"))
        elif (e.op in ("task_add", "fact_add") and e.result.get("outcome") != "pending"
              and _still_in(state, e.args.get("room"))):
            world.count("check:durable")
            kept = set(state["tasks"]) | {f for fs in state["facts"].values() for f in fs}
            if e.result["id"] not in kept:
                out.append(Failure("durable", f"{e.node} {e.op} {e.result['id'][:8]} was "
                                   "answered ok, then lost from its memory"))
    return out


def _still_in(state: dict[str, Any], name: str | None) -> bool:
    return any(r["name"] == name and r["state"] == "joined" and not r["removed_at"]
               for r in state["rooms"].values())


def check_recovered(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    del truth
    out: list[Failure] = []
    for name in world.nodes:
        world.count("check:recovered")
        out += [Failure("recovered", f"{name}: actor {actor} is FAILED after healing")
                for actor in states[name].get("failed_actors", [])]
    for e in world.history.events:
        if e.index == -1 and e.op == "read" and e.phase in ("fail", "info"):
            out.append(Failure("recovered", f"{e.node}: the healed read ended {e.phase}"))
    return out


SIM_TEXT = re.compile(r"^[mqa][0-9]+$")  # what the workload sends (tests/sim/client.py)


def check_once(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    del truth
    out: list[Failure] = []
    for name in world.nodes:
        texts = Counter((h["sender"], h["text"]) for h in states[name]["held"].values()
                        if isinstance(h.get("text"), str) and SIM_TEXT.match(h["text"]))
        world.count("check:once")
        out += [Failure("once", f"{name} holds {n} messages {text!r} from {sender[:9]}")
                for (sender, text), n in sorted(texts.items()) if n > 1]
        sent = Counter(m["text"] for m in states[name]["sent"].values()
                       if isinstance(m.get("text"), str) and SIM_TEXT.match(m["text"]))
        out += [Failure("once", f"{name}'s outbox has {n} messages {text!r}")
                for text, n in sorted(sent.items()) if n > 1]
    return out
