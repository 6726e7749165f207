"""The workload: a list of user actions drawn from the seed, up front, so it can be shrunk.

Generation keeps a rough model of who is in which room so that most actions make sense (invite
someone you paired with, accept an invitation you were sent), but it never looks at what really
happened: an action whose precondition failed at run time is simply a ``fail`` in the history.
Task and question references are symbolic (the index of the action that made them) and resolved
by the client when it runs.

File reservations (``reserve``, ``renew``, ``release``, ``reservations``) are drawn afterwards
from a stream of their own (``{seed}/reservations``), against the membership the main workload
produced at each of its steps, and merged in by time: the main actions, their indexes and their
times are what they were before reservations existed, and so is every fault (reservation
actions never reach past the main workload's last time, which fixes the fault horizon).
"""

from __future__ import annotations

import random
from typing import Any

import attrs

ROOMS = ("r0", "r1")


@attrs.frozen
class Action:
    index: int
    at: float  # virtual seconds after the safety phase starts
    node: str
    kind: str
    args: dict[str, Any] = attrs.field(hash=False)


@attrs.frozen
class Scenario:
    nodes: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]  # set up directly in stores and relay (no SPAKE2 in-sim)
    actions: tuple[Action, ...]


class _Model:
    """Who we think is where; only used to make plausible actions."""

    def __init__(self, nodes: list[str], pairs: set[frozenset[str]]) -> None:
        self.nodes = nodes
        self.pairs = pairs
        self.members: dict[str, set[str]] = {}
        self.invited: dict[str, set[str]] = {}
        self.tasks: dict[str, list[int]] = {}
        self.questions: dict[str, list[int]] = {}  # asked node -> ask action indexes

    def paired(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.pairs


def _pairs(rng: random.Random, nodes: list[str]) -> set[frozenset[str]]:
    pairs = {frozenset((nodes[i], nodes[i + 1])) for i in range(len(nodes) - 1)}
    for i, a in enumerate(nodes):
        for b in nodes[i + 1:]:
            if rng.random() < 0.5:
                pairs.add(frozenset((a, b)))
    return pairs


def _choices(m: _Model, rng: random.Random) -> list[tuple[float, str, str, dict[str, Any]]]:
    """(weight, node, kind, args) for every action that makes sense now."""
    out: list[tuple[float, str, str, dict[str, Any]]] = []
    for room in ROOMS:
        mem, inv = m.members.get(room), m.invited.get(room, set())
        if mem is None:
            out.append((1.0, rng.choice(m.nodes), "create", {"room": room}))
            continue
        for a in sorted(mem):
            for b in m.nodes:
                if b not in mem and b not in inv and m.paired(a, b):
                    out.append((3.0, a, "invite", {"room": room, "peer": b}))
            out.append((5.0, a, "send", {"to": f"#{room}"}))
            out.append((1.0, a, "task_add", {"room": room}))
            out.append((1.0, a, "fact_add", {"room": room}))
            for task in m.tasks.get(room, []):
                out.append((2.0, a, "claim", {"room": room, "task": task}))
            if len(mem) > 1:
                out.append((0.5, a, "leave", {"room": room}))
                out.append((0.8, a, "kick", {"room": room, "peer": rng.choice(sorted(mem - {a}))}))
        for b in sorted(inv):
            out.append((4.0, b, "accept", {"room": room}))
            out.append((0.5, b, "decline", {"room": room}))
    for a in m.nodes:
        out.append((2.0, a, "read", {}))
        out.append((1.0, a, "sent", {}))
        for b in m.nodes:
            if a != b and m.paired(a, b):
                out.append((0.5, a, "send", {"to": b}))
                out.append((0.3, a, "ask", {"to": b}))
        if m.questions.get(a):
            out.append((1.0, a, "answer", {"ask": m.questions[a][-1]}))
    return out


def _update(m: _Model, index: int, node: str, kind: str, args: dict[str, Any]) -> None:
    room = args.get("room", "")
    if kind == "create":
        m.members[room], m.invited[room] = {node}, set()
    elif kind == "invite":
        m.invited[room].add(args["peer"])
    elif kind == "accept":
        m.invited[room].discard(node)
        m.members[room].add(node)
    elif kind == "decline":
        m.invited[room].discard(node)
    elif kind == "leave":
        m.members[room].discard(node)
    elif kind == "kick":
        m.members[room].discard(args["peer"])
    elif kind == "task_add":
        m.tasks.setdefault(room, []).append(index)
    elif kind == "ask":
        m.questions.setdefault(args["to"], []).append(index)


def generate(seed: int) -> Scenario:
    """The seed's scenario: 3 to 5 nodes, their pairings, and 15 to 30 timed actions."""
    rng = random.Random(f"{seed}/workload")
    nodes = [f"n{i}" for i in range(rng.randint(3, 5))]
    pairs = _pairs(rng, nodes)
    model = _Model(nodes, pairs)
    actions: list[Action] = []
    moments: list[tuple[float, dict[str, frozenset[str]]]] = []  # who is in each room, by step
    t = 0.0
    for _ in range(rng.randint(15, 30)):
        t += round(rng.expovariate(1 / 3.0), 3)
        options = _choices(model, rng)
        _, node, kind, args = rng.choices(options, weights=[o[0] for o in options])[0]
        _update(model, len(actions), node, kind, args)
        actions.append(Action(len(actions), t, node, kind, args))
        if kind == "claim" and rng.random() < 0.5:
            # A claim race: everyone else in the room claims the same task at the same moment.
            for other in sorted(model.members.get(args["room"], set()) - {node}):
                actions.append(Action(len(actions), t, other, "claim", dict(args)))
        if kind == "create" and rng.random() < 0.7:
            # A team forms: the creator invites everyone it paired with, and they accept.
            room = args["room"]
            peers = [b for b in nodes if b != node and model.paired(node, b)]
            for b in peers:
                _update(model, len(actions), node, "invite", {"room": room, "peer": b})
                actions.append(Action(len(actions), round(t + 0.5, 3), node, "invite",
                                      {"room": room, "peer": b}))
            for b in peers:
                _update(model, len(actions), b, "accept", {"room": room})
                actions.append(Action(len(actions), round(t + 2.0, 3), b, "accept", {"room": room}))
        if kind == "task_add" and rng.random() < 0.6:
            # A new task draws a race soon: every member claims it at the same moment.
            claim = {"room": args["room"], "task": len(actions) - 1}
            for other in sorted(model.members.get(args["room"], set())):
                actions.append(Action(len(actions), round(t + 2.0, 3), other, "claim", dict(claim)))
        if kind in ("kick", "leave") and rng.random() < 0.7:
            # A removal followed by posts: the one who is out tries to send (it must end
            # refused, and nobody may open it), and those still in post soon after (the one
            # who is out must not open that).
            gone = args["peer"] if kind == "kick" else node
            room = args["room"]
            for at, who in [(t + 0.5, gone)] + [(t + 1.0, m) for m in sorted(model.members[room])]:
                actions.append(Action(len(actions), round(at, 3), who, "send", {"to": f"#{room}"}))
        moments.append((t, {r: frozenset(mem) for r, mem in model.members.items()}))
    pair_list = tuple(sorted((min(p), max(p)) for p in pairs))
    reserving = _reservations(seed, nodes, moments, len(actions))
    return Scenario(tuple(nodes), pair_list, _merge(actions, reserving))


# A small fixed set of globs of one repository, chosen to overlap in every way: a file and the
# globs over it (``src/a.py`` ⊂ ``src/*.py`` ⊂ ``src/**``), a directory and a glob that crosses it
# (``docs/**`` vs ``**/*.md``), and ones that meet nothing (``tests/b.py`` vs ``docs/**``).
PATTERNS = ("src/**", "src/a.py", "src/*.py", "docs/**", "**/*.md", "docs/guide.md", "tests/b.py")
MINUTES = (1, 1, 2, 5, 30, 60)  # short ones lapse during the run (a run lasts minutes)


def _reservations(seed: int, nodes: list[str],
                  moments: list[tuple[float, dict[str, frozenset[str]]]],
                  first: int) -> list[Action]:
    """Reservation actions (indexes from ``first``), from their own stream, placed after the main
    workload's steps among the members of the moment; in about a quarter of seeds, none."""
    rng = random.Random(f"{seed}/reservations")
    if not moments or rng.random() < 0.25:
        return []
    horizon = max(t for t, _ in moments)
    out: list[Action] = []
    made: dict[str, list[tuple[int, str, tuple[str, ...]]]] = {}  # room -> (index, node, paths)

    def add(at: float, node: str, kind: str, args: dict[str, Any]) -> None:
        out.append(Action(first + len(out), at, node, kind, args))

    for t, members in moments:
        rooms = sorted(r for r, mem in members.items() if mem)
        if not rooms or rng.random() < 0.55:
            continue
        room = rng.choice(rooms)
        mem = sorted(members[room])
        at = round(min(t + rng.uniform(0.1, 2.5), horizon), 3)
        if rng.random() < 0.1:
            mem = sorted(nodes)  # someone who may be out of the room (removed, or never in)
        roll = rng.random()
        earlier = made.get(room, [])
        if roll < 0.5 or not earlier:
            # A race when more than one: each reserves at the same instant.
            racers = rng.sample(mem, rng.randint(1, min(3, len(mem))))
            for who in racers:
                paths = tuple(rng.sample(PATTERNS, rng.choice((1, 1, 2))))
                made.setdefault(room, []).append((first + len(out), who, paths))
                add(at, who, "reserve", {"room": room, "paths": list(paths),
                                         "minutes": rng.choice(MINUTES),
                                         "shared": rng.random() < 0.3})
        elif roll < 0.7:
            index, who, _ = rng.choice(earlier)
            add(at, who, "renew", {"room": room, "reserve": index,
                                   "minutes": rng.choice(MINUTES)})
        elif roll < 0.93:
            index, who, paths = rng.choice(earlier)
            mode = rng.choice(("id", "path", "all"))
            target: Any = {"id": index, "path": rng.choice(paths), "all": None}[mode]
            add(at, who, "release", {"room": room, "mode": mode, "target": target})
        else:
            add(at, rng.choice(mem), "reservations", {"room": room})
    return out


def _merge(main: list[Action], extra: list[Action]) -> tuple[Action, ...]:
    """``main`` in its own order with ``extra`` (sorted by time) slotted in before the first
    main action scheduled after each; a node runs its actions in list order."""
    pending = sorted(extra, key=lambda a: (a.at, a.index))
    out: list[Action] = []
    for action in main:
        while pending and pending[0].at < action.at:
            out.append(pending.pop(0))
        out.append(action)
    return tuple(out + pending)


def subset(scenario: Scenario, keep: set[int] | None) -> Scenario:
    """The scenario with only the actions whose index is in ``keep`` (all with None)."""
    if keep is None:
        return scenario
    return attrs.evolve(scenario, actions=tuple(a for a in scenario.actions if a.index in keep))
