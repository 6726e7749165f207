"""Rooms apply what arrives in the same transaction that takes it in.

The relay link commits each batch of inbound ops (with the relay cursor) before it acknowledges
them; the room's actor then opened, verified and applied them in a second transaction. Two
commits, each with its fsync, and the hand-offs between them (the link's event, the router, the
room's doorbell) were half of the time from a send until the recipient held the message.

:func:`inbound_applier` gives the link's store (``SqliteLinkStore(apply_inbound=...)``) a function
that, inside the link's transaction, lets every *running* room actor among the ops' rooms apply
its pending batch (:meth:`RoomActor.apply_within`); once the transaction committed, each actor
gets its batch (:meth:`RoomActor.applied_elsewhere`) and hands it on at its next catch-up, as if
it had applied it itself. A room whose actor is not running (not started yet, stopped, failed,
or between restarts: :attr:`RoomActor.running`) is left to the router's wake and its own
catch-up, exactly as before, since nobody would hand its batch on. Nothing changes in what is
durable when: the ops, the cursor and what applying them wrote are in one commit, made before
the link acknowledges.

The daemon wires it as ``Daemon.link_store = SqliteLinkStore(store,
apply_inbound=inbound_applier(room_actors))``, the store it gives the relay link, with
``room_actors`` kept by room id as it starts and stops room actors.

Order: the actor's own transactions and the link's are serialised by the store's write
limiter, and nothing awaits between the link's write returning and ``committed()`` handing the
batch over, while the actor's own write, started after the link's released the limiter, returns
only at a later checkpoint; so a batch applied in the link's commit is always with the actor
before anything it applies after it, and its catch-up hands them on in seq order. What the
actor keeps between batches (``_held``, ``_scanned``) is a cache of the store that either
transaction may refresh, each from what is committed when it runs.

Isolation: each room applies under its own savepoint. If one raises, only its part is rolled
back and logged, the link's commit goes on, and the room's actor meets the same op in its own
catch-up (where a bug crashes that actor, not the link every room depends on).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence

from crosstalk.actors.room import RoomActor
from crosstalk.core.room import Applied
from crosstalk.store.db import savepoint

log = logging.getLogger(__name__)


def inbound_applier(
    actors: Mapping[str, RoomActor],
) -> Callable[[sqlite3.Connection, Sequence[str]], Callable[[], None]]:
    """The ``apply_inbound`` of the link's store, over the running room actors by room id."""

    def apply_inbound(conn: sqlite3.Connection, rooms: Sequence[str]) -> Callable[[], None]:
        done: list[tuple[RoomActor, list[Applied]]] = []
        for room in rooms:
            actor = actors.get(room)
            if actor is None or not actor.running:
                # Not started, or stopped, failed or between restarts: it would not hand the
                # batch on. The router's wake (re)starts it or rings it, and it catches up.
                continue
            try:
                with savepoint(conn, "room_apply"):
                    applied = actor.apply_within(conn)
            except Exception:
                # A bug in an applier: keep it out of the link's commit; the room's own
                # catch-up meets the op again and crashes that actor (the supervisor's call).
                log.error("room %s: applying in the link's transaction failed", room,
                          exc_info=True)
                continue
            if applied:
                done.append((actor, applied))

        def committed() -> None:
            for actor, applied in done:
                actor.applied_elsewhere(applied)

        return committed

    return apply_inbound
