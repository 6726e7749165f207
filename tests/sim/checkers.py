"""The invariants, checked against the relay's own order of events (its committed writes).

Ground truth: every join, drop and post the relay committed, in commit order (``SimRelay.truth``).
A member's *interval* in a room runs from a join step to the next drop step. Each checker is
linear in the history; each names the invariant of issue #18 it guards:

1. ``delivery``: a message posted while M was a member reaches M's store, and M's reader gets
   it exactly once after dropping duplicates by id: ``read_lost`` when no read that reached the
   reader handed it out, ``read_dup`` when a read hands out again what the reader acknowledged.
   Checked for posts in a member's current membership (leaving deletes the evidence, and what
   was posted before a member left and came back need not have reached it before it left).
2. ``claims``: per task, at most one claimant told ``won`` (a final answer: one decided on a
   memory that gave ops up comes back ``pending``); all replicas agree on the holder; and no
   whole replica (:func:`tests.sim.truth.whole`) names another holder than the one told ``won``
   (a replica that gave ops up and was never repaired decides provisionally).
3. ``removed``: a node never opens an op posted while it was not a member (after removal): the
   relay never hands it over, and no message of it is held.
4. ``roster``: after healing, each member's roster equals the relay's; a removed node does not
   still think it is joined.
5. ``state``: a sent message's delivery state only moves forward, and its final state is true.
Also ``link`` (M's relay cursor covers every op posted while M was a member: the lead of #18),
``memory`` (after healing, no member's room memory still waits on a hole), ``bug`` (an op
raised something that is not a CrosstalkError), ``reservations`` (file reservations: one book on
every whole replica, no overlap of different holders unless both shared, nothing held by a
member a rekey removed, a grant the same everywhere: :mod:`tests.sim.check_reservations`) and
``alarm`` (a member reports a membership change that does not verify only about a room a lying
relay touched), ``durable`` and ``recovered`` (the storage faults:
:mod:`tests.sim.check_storage`), ``rejected`` (no op thrown away for a reason the world does not
explain: :mod:`tests.sim.check_rejects`), ``caught_up`` (healed, every room applies what its
link committed within a bound, with no new op to wake it: :mod:`tests.sim.check_caught_up`),
``hangup`` (an op whose client hung up mid-request took whole or not at all) and ``pairing``
(every room of two is whole: both ends joined, one key, both at the relay; a failed pairing
leaves nothing): :mod:`tests.sim.check_door`.
The roster checker's truth
is the room's signed membership history, not the relay's rows (issue 36: a lying relay may put
a removed member back in its rows; ``removed`` then shows they read nothing sent after).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from typing import Any

from crosstalk.wire.chain import ChainState
from tests.sim.check_caught_up import check_caught_up
from tests.sim.check_door import check_hangups, check_pairings
from tests.sim.check_rejects import check_rejected
from tests.sim.check_reservations import check_reservations
from tests.sim.check_storage import check_durable, check_once, check_recovered
from tests.sim.history import stamp
from tests.sim.truth import Failure, Truth, replicas, whole
from tests.sim.world import World

__all__ = ["CHECKERS", "Failure", "Truth", "check_all"]

RANK = {"queued": 0, "sent": 1, "delivered": 2, "read": 3}


def _reads(world: World) -> tuple[dict[str, set[str]], list[Failure]]:
    """Per node, every id an ok read handed out; and ids handed out again after an ok ack.

    Reading is at least once (e2fbb85): ``read`` changes nothing and only ``ack`` of its lease
    marks messages read and sends receipts. So a read whose reply was lost (``info``) showed
    nothing and is not counted, and its messages stay unread; a read that came back ``ok`` put
    them in front of the reader even if the ack was lost after it (then a later read hands
    them out again, which the reader drops by id; that is not a duplicate). Whether a message
    *is* read (the ``state`` checker's truth) is the reader's store, ``read_at``, which only a
    committed ack sets.
    """
    shown: dict[str, set[str]] = defaultdict(set)
    leases: dict[str, list[str]] = {}
    acked: dict[str, set[str]] = defaultdict(set)
    dups: list[Failure] = []
    for e in world.history.events:
        if e.phase != "ok":
            continue
        if e.op == "read":
            again = [i for i in e.result["ids"] if i in acked[e.node]]
            dups += [Failure("read_dup", f"{e.node} was handed {i[:8]} again after acking it")
                     for i in again]
            shown[e.node].update(e.result["ids"])
            if e.result.get("lease"):
                leases[e.result["lease"]] = e.result["ids"]
        elif e.op == "ack" and e.args.get("lease") in leases:
            acked[e.node].update(leases[e.args["lease"]])
    return shown, dups


def check_delivery(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    message_ids = {m for s in states.values() for m in s["sent"]}
    message_ids |= {e.result["id"] for e in world.history.events
                    if e.op in ("send", "answer") and e.phase == "ok" and e.result.get("id")}
    shown, out = _reads(world)
    for p in truth.posts:
        if p.op_id not in message_ids:
            continue
        for name, node in world.nodes.items():
            # Only the current membership: a member who left with ops still on their way (seed
            # 134: n2 left at the instant its link came back) never gets them, by design.
            if node.fp == p.fp or not truth.member_since(p.room, node.fp, p.step):
                continue
            world.count("check:delivery")
            held = states[name]["held"].get(p.op_id)
            sender = world.by_fp(p.fp)
            where = f"{p.op_id[:8]} ({sender}→{name}, room {p.room[:6]} seq {p.seq})"
            if held is None:
                out.append(Failure("delivery", f"never reached {name}: {where}"))
            elif p.op_id not in shown[name]:
                out.append(Failure("read_lost", f"held (read={held['read']}) but no read "
                                                f"handed it out: {where}"))
    return out


def check_claims(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    winners: dict[str, set[str]] = defaultdict(set)
    for e in world.history.ok("task_claim"):
        if e.result.get("outcome") == "won":
            winners[e.args["id"]].add(e.node)
    for task, who in sorted(winners.items()):
        world.count("check:claims")
        if len(who) > 1:
            out.append(Failure("claims", f"task {task}: {sorted(who)} were all told won"))
    holders: dict[str, dict[str, str | None]] = defaultdict(dict)
    final: dict[str, dict[str, str | None]] = defaultdict(dict)  # the whole replicas' holders
    for name, s in states.items():
        for task, rec in s["tasks"].items():
            if truth.member_now(rec["room"], world.nodes[name].fp):
                holders[task][name] = rec["claimer"]
                if whole(states, name, rec["room"]):
                    final[task][name] = rec["claimer"]
    for task, seen in sorted(holders.items()):
        if len(set(seen.values())) > 1:
            named = {n: world.by_fp(v) if v else None for n, v in sorted(seen.items())}
            out.append(Failure("claims", f"task {task}: replicas disagree on holder {named}"))
        elif winners.get(task) and len(winners[task]) == 1:
            (winner,) = winners[task]
            wrong = {n: world.by_fp(v) for n, v in sorted(final[task].items())
                     if v is not None and v != world.nodes[winner].fp}
            if wrong:
                out.append(Failure("claims", f"task {task}: {winner} won, replicas say {wrong}"))
    return out


def check_removed(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    first: dict[tuple[str, str], int] = {}
    for p in truth.posts:
        first.setdefault((p.room, p.op_id), p.step)
    for p in truth.posts:
        if first[(p.room, p.op_id)] != p.step:
            # A late retry of an op the relay had already pruned gets a new seq (seed 123): the
            # first copy is the one whose readers count.
            continue
        for name, node in world.nodes.items():
            if node.fp == p.fp or not truth.out_at(p.room, node.fp, p.step):
                continue
            world.count("check:removed")
            s = states[name]
            # What the relay handed this node (its inbound log) or held as a message; not the
            # memory outcomes a member's snapshot brought when it was let back in (seed 154:
            # the room's tasks are every member's to know, whenever they were added).
            # A lying relay that put the node back in its rows routes ops to it (inbound):
            # what counts there is that nothing of them was opened (held). And once the room
            # invites the node back, the invitation's key opens that epoch's earlier ops too, if
            # the relay handed them over (by design: an invitation carries the current key; seed
            # 1281), so in such a room only a node never invited back after the op counts.
            lied = p.room in world.relay.lied_rooms
            if lied and any(i > p.step for i in truth.invites.get((p.room, node.fp), [])):
                continue
            routed = not lied and p.op_id in s["inbound"].get(p.room, ())
            if p.op_id in s["held"] or routed:
                out.append(Failure("removed", f"{name} opened {p.op_id[:8]} (room {p.room[:6]} "
                                              f"seq {p.seq}) posted after it was out"))
    return out


def check_roster(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    snapshot = world.relay.storage.load()
    # Whom the room's signed membership history lists (a lying relay's rows do not count); a
    # "left" entry is someone who is not in the room any more (kept for their signatures).
    relay_rooms = {
        r.room: {fp: e.state for fp, e in ChainState.replay(r.room, r.chain, verify=False)
                 .members.items() if e.state != "left"}
        for r in snapshot.rooms
    }
    for room, members in sorted(relay_rooms.items()):
        want = {fp: ("member" if st == "joined" else "invited") for fp, st in members.items()}
        for name, node in world.nodes.items():
            if members.get(node.fp) != "joined":
                continue
            world.count("check:roster")
            have = states[name]["roster"].get(room, {})
            if have != want:
                labels = {world.by_fp(f): v for f, v in sorted(have.items())}
                wanted = {world.by_fp(f): v for f, v in sorted(want.items())}
                out.append(Failure("roster", f"{name} in room {room[:6]} sees {labels}, "
                                             f"relay says {wanted}"))
    for name, node in world.nodes.items():
        for room, r in sorted(states[name]["rooms"].items()):
            # A removal keeps the row (``state`` stays joined) and sets ``removed_at``: that is the
            # product telling the removed member, so it is not "still thinks it is in".
            if (r["state"] == "joined" and r.get("removed_at") is None
                    and relay_rooms.get(room, {}).get(node.fp) != "joined"):
                out.append(Failure("roster", f"{name} still thinks it is in room {room[:6]} "
                                             f"({r['name']}); the relay does not"))
    return out


def _moved_back(trail: list[str]) -> bool:
    """Whether a state trail ever moves backwards: queued → sent → delivered → read, or
    queued → refused (a post the relay will never take; nothing follows it)."""
    for a, b in itertools.pairwise(trail):
        if "refused" in (a, b):
            if (a, b) not in (("queued", "refused"), ("refused", "refused")):
                return True
        elif RANK.get(b, -1) < RANK.get(a, -1):
            return True
    return False


def check_states(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    out: list[Failure] = []
    seen: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in world.history.events:
        if e.phase != "ok":
            continue
        if e.op in ("send", "answer") and e.result.get("id"):
            seen[(e.node, e.result["id"])].append(e.result["state"])
        elif e.op == "sent":
            for msg, state in sorted(e.result["states"].items()):
                seen[(e.node, msg)].append(state)
    for (name, msg), trail in sorted(seen.items()):
        if _moved_back(trail):
            out.append(Failure("state", f"{msg[:8]} at {name} went {' → '.join(trail)}"))
    posted = {p.op_id: p for p in truth.posts}
    for name, s in states.items():
        for msg, row in sorted(s["sent"].items()):
            post = posted.get(msg)
            have, want = row["state"], _true_state(world, truth, states, post, msg)
            world.count(f"check:state:{want}")
            if have == want:
                continue
            if post is not None and have in RANK and _bounded(world, truth, states, post, have):
                continue
            out.append(Failure("state", f"{msg[:8]} from {name} ends {have}, truth is {want}"
                                        f"{_why(world, truth, post, name)}"))
    return out


def _bounded(world: World, truth: Truth, states: dict[str, Any], post: Any, have: str) -> bool:
    """Whether ``have`` is true although it is not what every recipient's store says now.

    A recipient that has since left or been removed makes its store unreliable evidence either
    way: leaving deletes its held rows (the truth looks too low, so there is no upper bound), and
    a removed member keeps them and may read after its removal, when its receipt has no room to
    go to (too high). So the truth is then at least what the recipients still in the room say.
    A sender that left (or was removed) since hears no more receipts: its state lies anywhere
    from ``sent`` up to the truth. "Since" means any break in the membership, even one that
    ended with a rejoin: what was posted while someone was out never reaches them. (The old
    check demanded an exact truth in both cases, and flagged e.g. seed 16: "from n2 ends read,
    truth is sent", and seeds 6, 14, 78 of the richer workload: "ends delivered, truth is read"
    where only the removed member had read it.)
    """
    low = _true_state(world, truth, states, post, post.op_id, still_in=True)
    gone = any(truth.member_at(post.room, n.fp, post.step)
               and not truth.member_since(post.room, n.fp, post.step)
               for n in world.nodes.values() if n.fp != post.fp)
    high = "read" if gone else _true_state(world, truth, states, post, post.op_id)
    if not truth.member_since(post.room, post.fp, post.step):
        low = "sent"  # out for a while (seed 134: left and came back): receipts went by
    return RANK[low] <= RANK[have] <= RANK[high]


def _why(world: World, truth: Truth, post: Any, name: str) -> str:
    """A hint for the reader of a failure: what happened to the room around this post."""
    if post is None:
        return ""
    hints = []
    if not truth.member_since(post.room, post.fp, post.step):
        hints.append(f"{name} has left room {post.room[:6]} since")
    gone = [n.name for n in world.nodes.values() if n.fp != post.fp
            and truth.member_at(post.room, n.fp, post.step)
            and not truth.member_since(post.room, n.fp, post.step)]
    if gone:
        hints.append(f"recipients since gone: {', '.join(gone)}")
    return f" ({'; '.join(hints)})" if hints else ""


def _true_state(world: World, truth: Truth, states: dict[str, Any], post: Any, msg: str, *,
                still_in: bool = False) -> str:
    if post is None:
        # Never sequenced: refused if the relay answered the post with an error, else queued.
        return "refused" if msg in truth.refused else "queued"
    best = "sent"
    for name, node in world.nodes.items():
        if node.fp == post.fp or not truth.member_at(post.room, node.fp, post.step):
            continue
        if still_in and not truth.member_since(post.room, node.fp, post.step):
            continue
        held = states[name]["held"].get(msg)
        if held is not None:
            best = max(best, "read" if held["read"] else "delivered", key=RANK.__getitem__)
    return best


def check_link(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    """Every op others posted during a node's current membership is under its cursor.

    Only the current membership: a member that left or was removed forgets the room's inbound
    ops and cursor (the link drops them), so ops from an earlier membership are not under the
    cursor it starts again with when it rejoins (the earlier check demanded them: seeds 6, 202).
    Nor ops posted once the final reads began: a presence refresh sequenced at the instant the
    stores are read has had no time to travel (seed 224 demanded two such ops). The post's
    time is compared as the history rounds its own (seed 118: a memory-sync ask sequenced at
    352.11935996 read as before reads that began at 352.119360).
    """
    out: list[Failure] = []
    final = min((e.t for e in world.history.events if e.op == "sent" and e.index == -1),
                default=math.inf)
    for name, node in world.nodes.items():
        cursors = states[name]["cursors"]
        for p in truth.posts:
            if node.fp == p.fp or not truth.member_now(p.room, node.fp) or stamp(p.t) >= final:
                continue
            spans = truth.intervals.get((p.room, node.fp), [])
            if not spans or not spans[-1][0] < p.step < spans[-1][1]:
                continue
            world.count("check:link")
            if cursors.get(p.room, 0) < p.seq:
                out.append(Failure("link", f"{name} never committed seq {p.seq} of room "
                                           f"{p.room[:6]} ({world.by_fp(p.fp)}'s op; cursor "
                                           f"{cursors.get(p.room, 0)})"))
    return out


def check_memory(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    """After healing, no current member's memory of a room still waits on a hole, and the
    members' replicas hold the same facts.

    A hole (ops of the room log this member never got) is filled by a snapshot from another
    member, or given up when nobody can fill it (``crosstalk.actors.memory_sync``); one still
    open after the quiet period is a member whose memory stays behind for ever (seed 118: every
    member had a hole and each refused to answer the others). The reservation books those
    replicas hold are compared by ``check_reservations``.
    """
    out: list[Failure] = []
    facts: dict[str, dict[str, tuple[str, ...]]] = defaultdict(dict)
    for room, members in sorted(replicas(world, truth, states).items()):
        for name, hole in sorted(members.items()):
            world.count("check:memory")
            if hole is not None:
                out.append(Failure("memory", f"{name}'s memory of room {room[:6]} still has a "
                                             f"hole from seq {hole}"))
            else:
                facts[room][name] = tuple(states[name]["facts"].get(room, ()))
    for room, seen in sorted(facts.items()):
        if len(set(seen.values())) > 1:
            counts = {n: len(f) for n, f in sorted(seen.items())}
            out.append(Failure("memory", f"replicas of room {room[:6]} disagree on its facts "
                                         f"(how many each holds: {counts})"))
    return out


def check_bugs(world: World) -> list[Failure]:
    return [Failure("bug", f"{e.node} {e.op}: {e.result['error']}") for e in world.history.events
            if e.phase == "fail" and isinstance(e.result, dict) and e.result.get("bug")]


def check_alarms(world: World, truth: Truth, states: dict[str, Any]) -> list[Failure]:
    """``alarm``: a member says the relay offered a membership change that does not verify only
    about a room a lie touched: an honest relay never sets one off."""
    out: list[Failure] = []
    for name in world.nodes:
        for room, reason in sorted(states[name].get("alarms", {}).items()):
            world.count("check:alarm")
            if room not in world.relay.lied_rooms:
                out.append(Failure("alarm", f"{name} in room {room[:6]}: {reason}"))
    return out


CHECKERS = (check_delivery, check_claims, check_removed, check_roster, check_states, check_link,
            check_memory, check_reservations, check_alarms, check_durable, check_recovered,
            check_rejected, check_once, check_caught_up, check_hangups,
            check_pairings)


def check_all(world: World, states: dict[str, Any]) -> list[Failure]:
    truth = Truth(world)
    out = check_bugs(world)
    for checker in CHECKERS:
        out += checker(world, truth, states)
    return out
