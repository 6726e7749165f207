"""``reservations``: after healing, file reservations are one book on every replica, and it obeys
the rules (issue 37). Read from each node's store (``snapshot._books``), never from the core:

a. ``agree``: a room's current members whose memory has no hole (the replicas ``check_memory``
   compares facts over) hold the same book: where it stands (the seq and relay clock of its last
   input), every reservation that holds, and every op's outcome.
b. ``overlap``: on no replica do two reservations that hold, of different holders, name a common
   path of the same repository unless both are shared (exclusive/exclusive and shared/exclusive
   both count). Overlap is :func:`crosstalk.core.pathspec.overlaps`, decided afresh here rather
   than by the book's own conflict test. Nor does a book hold one that lapsed by its clock.
c. ``removed``: once a replica's memory has passed the seq of a ``Rekey`` that removed someone,
   it holds nothing of theirs granted before that seq. The rekeys are the removers' own
   (``memory_sent`` keeps them while the room is) and their seqs come from the relay's log.
d. ``granted``: no final answer is contradicted later. A reserve the workload was told
   ``granted`` (final: one decided on a memory that gave ops up comes back ``pending``,
   ``memory_incomplete``) is granted until the same relay time on every replica that has its
   outcome and whose memory is whole (no hole, nothing given up: :func:`tests.sim.truth.whole`).
   A replica whose memory gave ops up and was not repaired may hold it otherwise: what it
   decided is provisional, and the answers it gave said so (sim seeds 418 and 261: a grant
   decided on the whole log, held refused by members that gave the ops before it up and that no
   complete member was left to repair). A refusal is told as an error that names no
   reservation id, so final refusals are not followed here.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

from crosstalk.core.pathspec import overlaps
from tests.sim.truth import Failure, Truth, replicas, whole
from tests.sim.world import World

# What a reserve (and only a reserve) can come back as, in a book's outcomes.
RESERVE_CODES = frozenset({"granted", "refused", "already_exists", "invalid", "over_limit"})


def check_reservations(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    return (_agree(world, truth, states) + _no_overlap(world, states)
            + _removed_hold_nothing(world, truth, states) + _granted_everywhere(world, states))


def _key(book: dict[str, Any] | None) -> str:
    return json.dumps(book, sort_keys=True)


def _agree(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    for room, members in sorted(replicas(world, truth, states).items()):
        books = {n: states[n]["books"].get(room) for n, hole in members.items() if hole is None}
        if not any(books.values()):
            continue  # nobody in the room ever reserved anything
        world.count("check:reservations")
        if len({_key(b) for b in books.values()}) > 1:
            seen = {n: (b["last_seq"], sorted(b["held"]), len(b["outcomes"])) if b else None
                    for n, b in sorted(books.items())}
            out.append(Failure("reservations", f"replicas of room {room[:6]} disagree on its "
                                               f"book (last seq, held, outcomes): {seen}"))
    return out


def _clash(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, str] | None:
    """The patterns by which ``a`` and ``b`` may not both hold, if any."""
    if a["holder"]["fingerprint"] == b["holder"]["fingerprint"] or (a["shared"] and b["shared"]):
        return None
    if a["repo"].casefold() != b["repo"].casefold():
        return None
    return next(((p, q) for p in a["patterns"] for q in b["patterns"] if overlaps(p, q)), None)


def _no_overlap(world: World, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    for name in world.nodes:
        for room, book in sorted(states[name]["books"].items()):
            held = sorted(book["held"].values(), key=lambda r: (r["granted_seq"],
                                                               r["reservation_id"]))
            world.count("check:reservations:held")
            for r in held:
                if r["until"] <= book["clock"]:
                    out.append(Failure("reservations", f"{name} room {room[:6]}: "
                                       f"{r['reservation_id']} lapsed at {r['until']} but holds "
                                       f"at clock {book['clock']}"))
            for a, b in itertools.combinations(held, 2):
                clash = _clash(a, b)
                if clash is not None:
                    out.append(Failure("reservations", f"{name} room {room[:6]}: "
                                       f"{_who(world, a)} and {_who(world, b)} both hold "
                                       f"{clash[0]} / {clash[1]}"))
    return out


def _who(world: World, r: dict[str, Any]) -> str:
    kind = "shared" if r["shared"] else "exclusive"
    return f"{world.by_fp(r['holder']['fingerprint'])}'s {kind} {r['reservation_id']}"


def _removed_hold_nothing(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    seqs: dict[tuple[str, str], int] = {}
    for p in truth.posts:
        seqs.setdefault((p.room, p.op_id), p.seq)
    rekeys = {(room, seqs[(room, op_id)], removed) for s in states.values()
              for room, op_id, removed in s["rekeys"] if (room, op_id) in seqs}
    for room, seq, removed in sorted(rekeys):
        for name in world.nodes:
            book = states[name]["books"].get(room)
            if states[name]["memory_seq"].get(room, 0) < seq:
                continue  # this replica has not got that far (the removed member's own, say)
            world.count("check:reservations:rekey")
            kept = [r["reservation_id"] for r in (book["held"].values() if book else ())
                    if r["holder"]["fingerprint"] == removed and r["granted_seq"] < seq]
            if kept:
                out.append(Failure("reservations", f"{name} room {room[:6]}: "
                                   f"{world.by_fp(removed)} was removed at seq {seq} and still "
                                   f"holds {kept}"))
    return out


def _granted_everywhere(world: World, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    told: dict[str, tuple[str, float]] = {}
    for e in world.history.ok("reserve"):
        if e.result.get("state") == "granted":
            told[e.result["id"]] = (e.node, e.result["until"])
    found: dict[str, dict[str, tuple[str, float | None]]] = defaultdict(dict)
    for name in world.nodes:
        for room, book in states[name]["books"].items():
            if not whole(states, name, room):
                continue  # provisional: a repair may yet decide these otherwise
            for o in book["outcomes"].values():
                if o.get("reservation_id") in told and o["code"] in RESERVE_CODES:
                    found[o["reservation_id"]][name] = (o["code"], o.get("until"))
    for rid, (author, until) in sorted(told.items()):
        world.count("check:reservations:granted")
        wrong = {n: v for n, v in sorted(found[rid].items()) if v != ("granted", until)}
        if wrong:
            out.append(Failure("reservations", f"{author} was told {rid} was granted until "
                                               f"{until}; replicas say {wrong}"))
    return out
