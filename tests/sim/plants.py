"""Planted bugs: the world built with one deliberately broken piece, to prove a checker bites.

Each is world composition: a daemon's ``seams.appliers`` / ``seams.applied_listeners`` lists
(or the ``wake_room`` capability its actors are given) edited before it starts, or a sim-only
option of the relay shell; never a patch of a product global.
``PLANTS[name](scenario)`` gives the plants per node (key ``"relay"``: options for SimRelay).

* ``drop_sender`` (delivery): every node's appliers skip the messages ``n0`` sends.
* ``claim_flip`` (claims): ``n1`` applies every claim as if ``n1`` had made it.
* ``leaky_relay`` (removed): the relay keeps pushing a room's ops to members it dropped, and
  members ignore ``Rekey`` (they keep posting under the epoch the removed member holds). The leak
  alone is not a bug the product can show: a removal rekeys, so what leaks stays sealed.
* ``roster_ignores`` (roster): ``n1`` forgets ``n0`` in every named room after each batch.
* ``state_regress`` (state): a sender's ``read`` receipts fall back to ``delivered``.
* ``sync_deaf`` (memory): every node's appliers skip memory snapshot pieces, so a member whose
  memory has a hole (it joined after the room's first ops) never fills it.
* ``rows_believed`` (roster): every node lists again, after each batch, whoever its roster had
  as gone, as a member who believes a relay's rows over the signed history would after the relay
  put a removed member back.
* ``reserve_unchecked`` (reservations): ``n1`` applies everyone else's reserves each in a
  repository of its own, so its book grants them all, conflicts or not.
* ``local_clock`` (reservations): ``n1`` applies everyone else's ops at its own clock's time when
  they arrive, not the relay's time for them, so its reservations lapse (and are granted until)
  by a clock of its own.
* ``amnesia`` (durable): ``n0`` deletes its oldest sent message after each batch, as a store
  that lost a commit it had acknowledged would.
* ``no_second_chance`` (recovered): ``n1``'s supervisor restarts nothing, and a room actor of
  ``n1`` crashes once (its first batch): it stays FAILED.
* ``lost_wakes`` (caught_up): ``n1`` loses every other wake of each room (a doorbell that drops
  rings would), so a room catches up only at a later wake: the last ops before a quiet spell
  wait for good.
* ``undo_on_hangup`` (hangup): every daemon, when a reply cannot be written because its
  client hung up, deletes its newest sent message (it undoes the send nobody heard of, though
  the relay has it already). A world option (``World(undo_on_hangup=)``: the hook sits on the
  server end of each in-memory connection, tests/sim/door.py), like ``leaky_relay``.
* ``false_alarm`` (alarm): ``n1`` says the relay offered a change that does not verify, about
  every room it is in, after each batch.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Any

import attrs

from crosstalk.actors.restarts import RestartIntensity
from crosstalk.actors.room import Applier
from crosstalk.core.room import Applied
from crosstalk.daemon.tree import Daemon
from crosstalk.wire.memory import TaskClaim
from crosstalk.wire.reservations import ReleaseOp, RenewOp, ReserveOp
from crosstalk.wire.room_ops import MemoryEnvelope, MessageOp, Rekey, SyncChunk
from tests.sim.workload import Scenario
from tests.sim.world import Plant, keys_for


def _wrap_appliers(daemon: Daemon, change: Callable[[Applied], Applied | None]) -> None:
    """Every applier sees ``change(applied)`` instead (None: the op is skipped)."""

    def wrap(inner: Applier) -> Applier:
        def applier(conn: sqlite3.Connection, applied: Applied) -> None:
            changed = change(applied)
            if changed is not None:
                inner(conn, changed)
        return applier

    daemon.seams.appliers[:] = [wrap(a) for a in daemon.seams.appliers]


def _drop_sender(victim: str) -> Plant:
    def plant(daemon: Daemon) -> None:
        _wrap_appliers(daemon, lambda a: None if isinstance(a.op, MessageOp)
                       and a.sender == victim else a)
    return plant


def _claim_flip(daemon: Daemon) -> None:
    me = daemon.keys.fingerprint

    def change(a: Applied) -> Applied:
        if isinstance(a.op, MemoryEnvelope) and isinstance(a.op.op, TaskClaim):
            return attrs.evolve(a, sender=me)
        return a
    _wrap_appliers(daemon, change)


RESERVATION_OPS = (ReserveOp, RenewOp, ReleaseOp)


def _reserve_unchecked(daemon: Daemon) -> None:
    def change(a: Applied) -> Applied:
        if isinstance(a.op, MemoryEnvelope) and isinstance(a.op.op, ReserveOp):
            op = a.op.op
            alone = attrs.evolve(op, repo=f"{op.repo}-{op.reservation_id}")
            return attrs.evolve(a, op=attrs.evolve(a.op, op=alone))
        return a
    _wrap_appliers(daemon, change)


def _local_clock(daemon: Daemon) -> None:
    # The appliers run in the node's own tasks, so time.time() is this node's (skewed) clock.
    def change(a: Applied) -> Applied:
        if isinstance(a.op, MemoryEnvelope) and isinstance(a.op.op, RESERVATION_OPS):
            return attrs.evolve(a, relay_ts=time.time())
        return a
    _wrap_appliers(daemon, change)


def _skip_rekey(daemon: Daemon) -> None:
    _wrap_appliers(daemon, lambda a: None if isinstance(a.op, Rekey) else a)


def _skip_snapshots(daemon: Daemon) -> None:
    _wrap_appliers(daemon, lambda a: None if isinstance(a.op, SyncChunk) else a)


def _forget(victim: str) -> Plant:
    def plant(daemon: Daemon) -> None:
        async def listener(applied: list[Applied]) -> None:
            del applied
            await daemon.store.write(lambda c: c.execute(
                "DELETE FROM room_members WHERE fingerprint = ? AND room_id IN "
                "(SELECT room_id FROM rooms WHERE kind = 'shared')", (victim,)))
        daemon.seams.applied_listeners.append(listener)
    return plant


def _regress(daemon: Daemon) -> None:
    async def listener(applied: list[Applied]) -> None:
        del applied
        await daemon.store.write(lambda c: c.execute(
            "UPDATE sent_messages SET receipt = 'delivered' WHERE receipt = 'read'"))
    daemon.seams.applied_listeners.append(listener)


def _believe_rows(daemon: Daemon) -> None:
    async def listener(applied: list[Applied]) -> None:
        del applied
        await daemon.store.write(lambda c: c.execute(
            "UPDATE room_members SET gone = 0 WHERE gone = 1 AND room_id IN "
            "(SELECT room_id FROM rooms WHERE kind = 'shared')"))
    daemon.seams.applied_listeners.append(listener)


def _amnesia(daemon: Daemon) -> None:
    async def listener(applied: list[Applied]) -> None:
        del applied
        await daemon.store.write(lambda c: c.execute(
            "DELETE FROM sent_messages WHERE msg_id = (SELECT min(msg_id) FROM sent_messages)"))
    daemon.seams.applied_listeners.append(listener)


def _no_second_chance(daemon: Daemon) -> None:
    # A supervisor that restarts nothing (a crash on a full disk still waits and retries), and
    # one crash of a room actor, once: the first batch it applies.
    supervisor: Any = daemon.supervisor
    supervisor._new_intensity = functools.partial(
        RestartIntensity, max_restarts=0, window=60.0, backoff_initial=0.05, backoff_max=2.0)
    crashed: list[bool] = []

    async def listener(applied: list[Applied]) -> None:
        del applied
        if not crashed:
            crashed.append(True)
            raise RuntimeError("planted: one crash")
    daemon.seams.applied_listeners.append(listener)


def _cry_wolf(daemon: Daemon) -> None:
    async def listener(applied: list[Applied]) -> None:
        rooms = {a.room_id for a in applied}
        await daemon.store.write(lambda c: [
            c.execute("INSERT OR IGNORE INTO membership_alarms SELECT room_id, 0, 'planted' "
                      "FROM rooms WHERE room_id = ?", (r,))
            for r in rooms])
    daemon.seams.applied_listeners.append(listener)


def _lose_wakes(daemon: Daemon) -> None:
    wake, ring = daemon.caps.wake_room, daemon.link._ring
    rung: dict[str, int] = {}

    def kept(room_id: str) -> bool:
        rung[room_id] = rung.get(room_id, 0) + 1
        return bool(rung[room_id] % 2)

    async def lossy(room_id: str) -> None:
        if kept(room_id):
            await wake(room_id)

    def lossy_ring(room_id: str) -> bool:
        # The link's own ring (since it rings a running room itself): a lost ring says rung.
        return ring(room_id) if kept(room_id) else room_id in daemon._rooms
    daemon.caps.wake_room = lossy
    daemon.link._ring = lossy_ring


PLANTS: dict[str, Callable[[Scenario, int], dict[str, list[Plant]]]] = {
    "drop_sender": lambda sc, seed: {n: [_drop_sender(_fp_of(seed, sc, "n0"))] for n in sc.nodes},
    "claim_flip": lambda sc, seed: {"n1": [_claim_flip]},
    "leaky_relay": lambda sc, seed: {n: [_skip_rekey] for n in sc.nodes},
    "roster_ignores": lambda sc, seed: {"n1": [_forget(_fp_of(seed, sc, "n0"))]},
    "state_regress": lambda sc, seed: {n: [_regress] for n in sc.nodes},
    "sync_deaf": lambda sc, seed: {n: [_skip_snapshots] for n in sc.nodes},
    "rows_believed": lambda sc, seed: {n: [_believe_rows] for n in sc.nodes},
    "false_alarm": lambda sc, seed: {"n1": [_cry_wolf]},
    "reserve_unchecked": lambda sc, seed: {"n1": [_reserve_unchecked]},
    "local_clock": lambda sc, seed: {"n1": [_local_clock]},
    "amnesia": lambda sc, seed: {"n0": [_amnesia]},
    "no_second_chance": lambda sc, seed: {"n1": [_no_second_chance]},
    "lost_wakes": lambda sc, seed: {"n1": [_lose_wakes]},
    "undo_on_hangup": lambda sc, seed: {},  # World(undo_on_hangup=True): see the module doc
}


def _fp_of(seed: int, scenario: Scenario, node: str) -> str:
    return keys_for(seed, scenario.nodes)[node].fingerprint
