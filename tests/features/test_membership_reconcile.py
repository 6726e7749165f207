"""Reconciling with the relay at link-up never undoes an accept that finished meanwhile.

The simulation's seed 229: the membership actor asked the relay which rooms we are in (it said
"invited"), the user's accept then joined at the relay and here, and only then did the
reconcile read our rooms ("joined"): the stale pair read as "removed and invited back", and the
room went back to an invitation, so nothing more in it reached us.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from crosstalk import crypto
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings, Request
from crosstalk.features.membership.lifecycle import reconcile_with_relay
from crosstalk.store.db import Store, open_store
from crosstalk.store.membership import mark_joined
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room, get_room
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import RoomOp

ROOM = "r" * 32
ME = crypto.Keys(b"\x01" * 32, b"\x02" * 32)


class _Host:
    """The daemon as reconciling sees it: a real store and relay client; nothing is sent."""

    def __init__(self, store: Store, relay: RelayClient) -> None:
        self.store = store
        self._relay = relay

    @property
    def keys(self) -> crypto.Keys:
        return ME

    def own_label(self) -> str:
        return "ana"

    async def relay(self) -> RelayClient:
        return self._relay

    async def wake_room(self, room_id: str) -> None:
        raise AssertionError(f"no room is joined by reconciling here ({room_id})")

    async def send_op(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str:
        raise AssertionError(f"nothing is sent by reconciling here ({room_id})")


def _invited(conn: sqlite3.Connection) -> None:
    add_room(conn, Room(ROOM, "team", "shared", "invited", 0, 0.0), b"k" * 32)
    add_member(conn, RoomMember(ROOM, ME.fingerprint, "ana", ME.ed_pub, ME.x_pub, "invited"))


async def _relay_answering_while_accept_finishes(
    store: Store, commands: trio.MemoryReceiveChannel[LinkCommand]
) -> None:
    """The relay lists the room as "invited"; before that answer arrives, the accept's local
    half commits (the relay had taken the accept just after listing)."""
    request = await commands.receive()
    assert isinstance(request, Request) and isinstance(request.frame, w.ListRooms)
    await store.write(lambda conn: mark_joined(conn, ROOM, ME.fingerprint))
    request.reply.send_nowait(w.RoomList(0, [w.RoomEntry(ROOM, "invited")]))


async def test_an_accept_finishing_during_the_relays_answer_stays_joined(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A room accepted while the reconcile waited on the relay's list is still joined after."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_invited)
        send, receive = trio.open_memory_channel[LinkCommand](1)
        host = _Host(store, RelayClient(send, LinkTimings()))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_relay_answering_while_accept_finishes, store, receive)
            await reconcile_with_relay(host, lambda: None, 5.0)
        room = await store.read(lambda conn: get_room(conn, ROOM))
        assert room.state == "joined"
