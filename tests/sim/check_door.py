"""The ways in: ``hangup`` (the control socket) and ``pairing`` (rooms of two; at the end).

``hangup``: an op whose client hung up mid-request took whole or not at all.

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

from crosstalk.wire.chain import ChainState
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


def check_pairings(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    """``pairing``: every room of two is whole. Whoever holds one (made by a real pairing,
    tests/sim/pairing.py, or set up directly) has joined it, and so has the other member of
    its roster, with the same first key, and the room's signed history at the relay has both
    joined; a pairing both clients were told joined names one room. A failed pairing leaves
    nothing behind: no room one side holds and the other does not."""
    del truth
    out: list[Failure] = []
    at_relay = _relay_members(world)
    for name, state in states.items():
        me = world.nodes[name].fp
        for room, row in sorted(state["rooms"].items()):
            if row["kind"] != "direct":
                continue
            world.count("check:pairing")
            other = [fp for fp in state["roster"].get(room, {}) if fp != me]
            peer = world.by_fp(other[0]) if len(other) == 1 else None
            theirs = states[peer]["rooms"].get(room) if peer else None
            if row["state"] != "joined" or theirs is None or theirs["state"] != "joined":
                held = f"{peer} holds {theirs['state'] if theirs else 'nothing'}" if peer \
                    else "its roster names nobody else"
                out.append(Failure("pairing", f"{name} holds room of two {room[:6]} "
                                   f"({row['state']}) but {held}: half made"))
            elif states[peer]["pair_keys"].get(room) != state["pair_keys"].get(room):
                out.append(Failure("pairing", f"{name} and {peer} hold room {room[:6]} under "
                                   "different keys"))
            elif at_relay.get(room) != {me, world.nodes[peer].fp}:
                out.append(Failure("pairing", f"room of two {room[:6]} of {name} and {peer}: "
                                   "the relay does not have both joined"))
    return out + _same_room(world)


def _relay_members(world: World) -> dict[str, set[str]]:
    rooms = world.relay.storage.load().rooms
    return {r.room: {fp for fp, e in ChainState.replay(r.room, r.chain, verify=False)
                     .members.items() if e.state == "joined"} for r in rooms}


def _same_room(world: World) -> list[Failure]:
    """Both clients of one pairing told ``joined`` name the same room (and each other)."""
    out: list[Failure] = []
    told = [e for e in world.history.events
            if e.op in ("room_new", "room_join") and e.phase == "ok"]
    for new in (e for e in told if e.op == "room_new"):
        joins = [e for e in told if e.op == "room_join" and e.result.get("you") ==
                 new.result.get("them")]
        if joins and not any(j.result.get("room") == new.result.get("room") for j in joins):
            out.append(Failure("pairing", f"{new.node} paired into room "
                               f"{str(new.result.get('room'))[:6]}, its joiner into another"))
    return out
