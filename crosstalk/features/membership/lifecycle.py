"""Creating and joining a room so that a lost answer never leaves us and the relay apart.

A request to the relay can be committed there and its answer lost (a dropped connection, a
crash). So the local side of a change is made so that it can be finished later from what the
relay says:

* **create** writes the room (id, key, ourselves) here first, then asks the relay. Asking again
  is harmless: ``room_exists`` for a room whose roster lists us means an earlier try got there.
  A room the relay does not know, that only we are in, that we made and whose creation the relay
  never confirmed, is created again at the next link-up (:func:`reconcile_with_relay`). One it
  confirmed is not: the relay deleted it (our own leave, its answer still on the way, when the
  link-up read our rooms: the simulation's seed 800 made it again).
* **accept** asks the relay first (the invitation's key is already here). If the relay says we
  are joined while we still say invited, whether on a retried ``accept`` or at the next link-up,
  :func:`finish_join` does the local half.
* **naming ourselves** after a join: the room learns our label, and members holding newer keys
  learn to share them, only from our ``MemberNamed``. Marking the room joined records the name as
  owed, and the commit that queues the op clears it; a crash in between (the room joined here, no
  name sent, so the newer epochs' ops wait at us for ever) is finished at the next link-up.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Protocol

import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.errors import CrosstalkError
from crosstalk.features.membership.actor import MembershipInput, fetch_roster
from crosstalk.features.membership.history import create_frame
from crosstalk.features.membership.key_share import send_owed
from crosstalk.store import membership as q
from crosstalk.store.db import Store
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import MemberNamed, RoomOp

log = logging.getLogger(__name__)


class RoomHost(Protocol):
    """What joining needs of the daemon: the store, the relay, our name, the room actors and
    the membership actor's inbox (where rosters are applied)."""

    store: Store
    membership: trio.MemorySendChannel[MembershipInput]

    @property
    def keys(self) -> crypto.Keys: ...

    def own_label(self) -> str: ...

    async def relay(self) -> RelayClient: ...

    async def wake_room(self, room_id: str) -> None: ...

    async def send_op(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None, epoch: int | None = None,
        also: OutboxWrite | None = None,
    ) -> str: ...


async def create_on_relay(relay: RelayClient, keys: crypto.Keys, room_id: str) -> None:
    """Create ``room_id`` on the relay with us as its only member; a retry is harmless."""
    create, _ = create_frame(keys, room_id)
    try:
        await relay.request(create, w.Ok)
    except CrosstalkError as exc:
        if exc.code != "room_exists":
            raise
        # Made by an earlier try whose answer was lost, if the relay lists us in it (the id is
        # 16 random bytes: nobody else picks it). Raises not_a_member otherwise.
        await relay.request(w.GetRoster(0, room_id), w.Roster)


async def relay_room_state(relay: RelayClient, room_id: str) -> str | None:
    """What the relay lists us as in ``room_id`` (``joined`` or ``invited``), or None."""
    listed = await relay.request(w.ListRooms(0), w.RoomList)
    return next((e.state for e in listed.rooms if e.room == room_id), None)


async def relay_says_joined(relay: RelayClient, room_id: str) -> bool:
    """Whether the relay lists us as a joined member of ``room_id``."""
    return await relay_room_state(relay, room_id) == "joined"


async def finish_join(host: RoomHost, room_id: str) -> None:
    """The local half of accepting, once the relay has us as joined: take the relay's roster,
    start the room and tell the room our name (the relay's roster carries none)."""
    keys = host.keys
    await host.store.write(lambda conn: q.mark_joined(conn, room_id, keys.fingerprint))
    await fetch_roster(host.store, await host.relay(), host.membership, room_id)
    await host.wake_room(room_id)
    await name_ourselves(host, room_id)


async def name_ourselves(host: RoomHost, room_id: str) -> None:
    """Queue our ``MemberNamed`` for ``room_id``, clearing the owed name in that commit."""
    await host.send_op(
        room_id, MemberNamed({host.keys.fingerprint: host.own_label()}),
        also=functools.partial(q.name_given, room_id=room_id),
    )


async def reconcile_with_relay(
    host: RoomHost, beat: Callable[[], None], within: float
) -> list[str]:
    """Bring every named room's state in line with the relay's list; returns the joined rooms
    whose roster should be fetched now."""
    keys = host.keys
    # Ours first, then the relay's: a room's state here changes only after the relay's did
    # (accept asks the relay first), so a list taken after ours is never older than it. Read
    # the other way round, an accept that finished in between looked like "joined here,
    # invited there" and was turned back into an invitation (the simulation's seed 229).
    local = await host.store.read(lambda conn: q.local_rooms(conn, keys.fingerprint))
    removed = await host.store.read(q.removed_rooms)
    relay = await host.relay()
    listed = await relay.request(w.ListRooms(0), w.RoomList, within=within)
    at_relay = {e.room: e.state for e in listed.rooms}
    joined = []
    for room_id, state, unconfirmed in local:
        beat()
        there = at_relay.get(room_id)
        if state == "invited" and there == "joined":
            await finish_join(host, room_id)  # an accept whose answer was lost
        elif state == "invited" and there is None:
            await host.store.write(functools.partial(q.forget_invitation, room_id=room_id))
        elif state == "joined" and there is None and unconfirmed:
            await create_on_relay(relay, keys, room_id)  # a create whose request was lost
            await host.store.write(
                functools.partial(q.set_create_pending, room_id=room_id, pending=False)
            )
        elif state == "joined" and there is None:
            await host.store.write(
                functools.partial(q.mark_removed, room_id=room_id, by=None, now=time.time())
            )
        elif state == "joined" and there == "invited":
            # Removed and invited back while we were away: the removal was never heard.
            await host.store.write(functools.partial(q.invited_again, room_id=room_id))
        elif state == "joined":
            joined.append(room_id)
    # Removed, then invited back: the invitation may have been applied before the removal was
    # heard (they travel apart), leaving the room marked removed. The relay's list settles it.
    for room_id in removed:
        if at_relay.get(room_id) in ("invited", "joined"):
            await host.store.write(functools.partial(q.invited_again, room_id=room_id))
            if at_relay[room_id] == "joined":
                await finish_join(host, room_id)
    for room_id in await host.store.read(q.names_owed):
        if room_id in joined:
            await name_ourselves(host, room_id)  # joined, then a crash before we said who
    await send_owed(host.store, host.send_op)  # keys owed, then a crash before they were sent
    return joined

