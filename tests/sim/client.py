"""Clients: run each node's actions through its control socket, one at a time, like a CLI would.

Each op is one connection to the node's real control server (tests/sim/door.py: the same
framing, dispatch and error replies as the unix socket). Every op is recorded as ``invoke`` then
``ok`` (with a compact observation), ``fail`` (an error reply: the daemon said no; or nothing
listened: its daemon was down) or ``info`` (the node crashed under it, its client hung up
mid-request, or it ran past ``OP_TIMEOUT``: its outcome is unknown). The server's reply to an
op that raised something other than a CrosstalkError is a product bug and is recorded as
``fail`` with ``bug: True`` (a checker flags it).

Pairings are set up directly, not through SPAKE2 (four round trips of key agreement per pair
would cost more than the rest of a run): the relay part runs the real frames (slot open and join,
which grants the add, then create, add and accept), the store part writes what ``room_new`` and
``room_join`` adopt (contact, room of two, both members, its key).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

import trio

from crosstalk.errors import CrosstalkError
from crosstalk.store.rooms import Contact, Room, RoomMember, add_member, add_room, upsert_contact
from crosstalk.wire import relay as w
from tests.sim import door
from tests.sim.determinism import NODE
from tests.sim.workload import Action
from tests.sim.world import Node, World
from tests.wire.chain_helpers import room_of_two_frames

OP_TIMEOUT = 120.0
BUG_REPLY = "The daemon hit a bug running"  # crosstalk.actors.control's reply to an op's bug
STORAGE_RETRIES, STORAGE_PAUSE = 5, 5.0  # a disk_full fault lasts at most 20 s
# Ops the design makes safe to repeat (an ack of a lease, an accept the relay already took, a
# claim we already hold, a renewal, a release, and every read).
IDEMPOTENT = frozenset({"ack", "room_accept", "task_claim", "reserve_renew", "release", "read",
                        "sent", "rooms", "reservations"})


def _adopt(conn: sqlite3.Connection, me: Node, them: Node, room_id: str, key: bytes) -> None:
    contact = upsert_contact(conn, Contact(them.fp, them.name, them.name, them.keys.ed_pub,
                                           them.keys.x_pub, added_at=0.0))
    add_room(conn, Room(room_id, contact.label, "direct", "joined", 0, 0.0), key)
    add_member(conn, RoomMember(room_id, them.fp, them.name, them.keys.ed_pub, them.keys.x_pub))
    add_member(conn, RoomMember(room_id, me.fp, me.name, me.keys.ed_pub, me.keys.x_pub))


async def pair(world: World, a: Node, b: Node) -> None:
    """``a`` and ``b`` end up paired, as after ``room new`` / ``room join`` (see module doc)."""
    rng = world.entropy.stream("pairing", "world")
    room_id, key = rng.randbytes(16).hex(), rng.randbytes(32)
    da, _ = await world.up(a)
    db, _ = await world.up(b)
    ra, rb = await da.relay(), await db.relay()
    # The simulated relay asks no proof of work (tests/sim/net.py): no work_ask round trip,
    # so a seed's schedule is what it was before there was one.
    slot = await ra.request(w.SlotOpen(0), w.Slot)
    await rb.request(w.SlotJoin(0, slot.slot), w.SlotJoined)
    ka, kb = a.keys, b.keys
    create, add, accept = room_of_two_frames(ka, kb, room_id)
    await ra.request(create, w.Ok)
    await ra.request(add, w.Ok)
    await rb.request(accept, w.Ok)
    await da.store.write(lambda c: _adopt(c, a, b, room_id, key))
    await db.store.write(lambda c: _adopt(c, b, a, room_id, key))
    await da.room_inbox(room_id)
    await db.room_inbox(room_id)
    world.history.add("world", "pair", "ok", {"a": a.name, "b": b.name}, room_id)


def _observe(op: str, records: list[dict[str, Any]]) -> Any:
    """The part of a reply the checkers need (kept small: it is hashed and written out)."""
    last = records[-1] if records else {}
    if op == "read":
        msgs = last.get("messages", [])
        return {
            "ids": [m["id"] for m in msgs], "lease": last.get("lease"),
            "asks": [[m["id"], m.get("correlation"), m.get("from")] for m in msgs
                     if m.get("kind") == "ask"],
        }
    if op == "sent":
        return {"states": {s["id"]: s["state"] for s in last.get("sent", [])}}
    if op in ("send", "answer"):
        return {"id": last.get("id"), "state": last.get("state")}
    if op == "rooms":
        return last
    if op in ("task_add", "fact_add"):
        return {"id": last.get("id"), "outcome": last.get("outcome")}
    if op == "task_claim":
        return {"outcome": last.get("outcome"), "claimed_by": last.get("claimed_by")}
    if op in ("reserve", "reserve_renew"):
        return {"id": last.get("id"), "state": last.get("state"), "until": last.get("until")}
    if op == "release":
        return {"released": last.get("released", []), "pending": last.get("pending", [])}
    if op == "reservations":
        return {"held": [[r["id"], r["holder_fingerprint"]] for r in last.get("reservations", [])],
                "now": last.get("now")}
    return {k: v for k, v in last.items() if isinstance(v, str | int | float | bool | None)}


def resolve(world: World, action: Action) -> tuple[str, dict[str, Any]] | None:
    """The op name and params for ``action``; None when a symbolic reference has no value."""
    a, k = action.args, action.kind
    room = a.get("room")
    if k == "create":
        return "room_create", {"name": room}
    if k == "invite":
        return "room_invite", {"room": room, "peers": [a["peer"]]}
    if k in ("accept", "decline", "leave"):
        return f"room_{k}", {"room": room}
    if k == "kick":
        return "room_kick", {"room": room, "peer": a["peer"]}
    if k == "send":
        return "send", {"to": a["to"], "text": f"m{action.index}"}
    if k in ("read", "sent"):
        return k, ({} if k == "read" else {"limit": 1000})
    if k in ("task_add", "fact_add"):
        return k, {"text": f"{k[0]}{action.index}", "room": room}
    if k == "claim":
        made = [e for e in world.history.events
                if e.index == a["task"] and e.phase == "ok" and e.op == "task_add"]
        if not made:
            return None
        return "task_claim", {"id": made[0].result["id"], "room": room}
    if k == "ask":
        return "ask", {"to": a["to"], "text": f"q{action.index}", "timeout": 30.0}
    if k == "answer":
        return _answer(world, action)
    if k in ("reserve", "renew", "release", "reservations"):
        return _reservation(world, action)
    raise AssertionError(f"unknown action kind {k}")


def _reservation(world: World, action: Action) -> tuple[str, dict[str, Any]] | None:
    """A reservation op, run from the node's checkout (``Node.repo``) as the CLI would be."""
    a, k = action.args, action.kind
    room, cwd = a["room"], str(world.nodes[action.node].repo)
    if k == "reserve":
        return "reserve", {"paths": a["paths"], "minutes": a["minutes"], "shared": a["shared"],
                           "reason": f"v{action.index}", "room": room, "cwd": cwd}
    if k == "reservations":
        return "reservations", {"room": room}
    targets: list[str] = []
    if k == "renew" or a["mode"] == "id":
        made = [e.result["id"] for e in world.history.events if e.op == "reserve"
                and e.phase == "ok" and e.index == (a["reserve"] if k == "renew" else a["target"])]
        if not made:
            return None  # the reserve failed, or its reply was lost
        if k == "renew":
            return "reserve_renew", {"id": made[0], "minutes": a["minutes"], "room": room}
        return "release", {"targets": made[:1], "room": room}
    if a["mode"] == "path":
        targets = [a["target"]]
    return "release", {"targets": targets, "room": room, "cwd": cwd}


def _answer(world: World, action: Action) -> tuple[str, dict[str, Any]] | None:
    asker = next((e.node for e in world.history.events
                  if e.index == action.args["ask"] and e.phase == "invoke"), None)
    seen = [q for e in world.history.ok("read", action.node) for q in e.result["asks"]
            if q[2] == asker and q[1]]
    if asker is None or not seen:
        return None
    return "answer", {"to": asker, "correlation": seen[-1][1], "text": f"a{action.index}"}


async def run_op(world: World, node: Node, op: str, params: dict[str, Any], index: int) -> None:
    """Run one op on ``node`` and record it; a read is acknowledged (its lease) once it returned.

    That is what the CLI does: print what ``read`` returned, then ``ack`` its lease. A crash in
    between hands the same messages out again; the reader drops them by id. An op refused with
    ``storage_full`` is tried again a few times, as its message asks the user to.
    """
    result = await run_one(world, node, op, params, index)
    if result == ("info", "hung up") and op in IDEMPOTENT:
        # The CLI tries again an op whose reply it did not get, where doing it twice is once.
        result = await run_one(world, node, op, params, index)
    for _ in range(STORAGE_RETRIES):
        # As the error asks: free some space (the fault ends) and try again.
        if result[0] != "fail" or result[1].get("code") != "storage_full":
            break
        await trio.sleep(STORAGE_PAUSE)
        result = await run_one(world, node, op, params, index)
    if op == "read" and result[0] == "ok" and result[1].get("lease"):
        await run_one(world, node, "ack", {"lease": result[1]["lease"]}, index)


async def run_one(
    world: World, node: Node, op: str, params: dict[str, Any], index: int,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[str, Any]:
    await world.up(node)
    # A checkout's path lies in the run's temp dir, whose name is random: the history (hashed
    # by the determinism canary) says only that the op ran from the node's checkout.
    shown = {k: ("<repo>" if k == "cwd" else v) for k, v in params.items()}
    world.history.add(node.name, op, "invoke", shown, None, index)
    hang_up, slow = world.hang_up(), world.slow_reader()
    if slow:
        world.count("fault:slow_reader")
    outcome: tuple[str, Any] = ("info", "cancelled")
    with trio.CancelScope() as scope:
        node.op_scopes.add(scope)
        try:
            with trio.move_on_after(OP_TIMEOUT):
                stream = node.door.connect(slow=slow)
                records = await door.request(stream, op, params, slow=slow, hang_up=hang_up,
                                             on_record=on_record)
                outcome = ("ok", _observe(op, records))
            if outcome[0] == "info":
                outcome = ("info", "timeout")
        except door.HungUp:
            world.count("fault:hang_up")
            outcome = ("info", "hung up")
        except (door.Ended, trio.BrokenResourceError):
            outcome = ("info", "connection ended")  # the daemon died under it
        except door.DaemonDown:
            outcome = ("fail", {"code": "daemon_unreachable", "message": "refused"})
        except CrosstalkError as exc:
            outcome = ("fail", _failure(node, exc))
        finally:
            node.op_scopes.discard(scope)
    world.history.add(node.name, op, outcome[0], shown, outcome[1], index)
    return outcome


def _failure(node: Node, exc: CrosstalkError) -> dict[str, Any]:
    """An error reply as the history records it; the control server's answer to an op that
    raised something other than a CrosstalkError is a product bug (a checker flags it)."""
    if exc.code == "internal" and exc.message.startswith(BUG_REPLY):
        return {"bug": True, "error": exc.message}
    # A message may name the run's temp dir (storage_full does), whose name is random.
    return {"code": exc.code, "message": exc.message.replace(str(node.home.root.parent), "<tmp>")}


async def _await_invitation(world: World, node: Node, room: str) -> None:
    """Wait (bounded) until ``node`` holds an invitation to ``room``, as a user would."""
    for _ in range(60):
        daemon, _ = await world.up(node)
        pending = None
        with trio.CancelScope() as scope:  # a crash cancels the read, as it does ops
            node.op_scopes.add(scope)
            try:
                pending = await daemon.store.read(
                    lambda c: c.execute(
                        "SELECT 1 FROM rooms WHERE name = ? AND state = 'invited'", (room,)
                    ).fetchone()
                )
            finally:
                node.op_scopes.discard(scope)
        if pending is not None:
            return
        await trio.sleep(1.0)


async def client(world: World, node: Node, actions: list[Action], start: float) -> None:
    """Run ``node``'s actions in order, each no earlier than its scheduled time."""
    NODE.set(node.name)
    for action in actions:
        await trio.sleep_until(max(trio.current_time(), start + action.at))
        if action.kind in ("accept", "decline"):
            await _await_invitation(world, node, action.args["room"])
        resolved = resolve(world, action)
        if resolved is None:
            world.history.add(node.name, action.kind, "fail", action.args,
                              {"code": "unresolved"}, action.index)
            continue
        await run_op(world, node, resolved[0], resolved[1], action.index)
