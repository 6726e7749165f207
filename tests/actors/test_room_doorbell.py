"""A room's wake-up cannot be lost behind a full inbox: the doorbell is level-triggered."""

from __future__ import annotations

import sqlite3

import trio

from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import RoomActor
from crosstalk.actors.room_send import SendOp
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError
from crosstalk.store.db import Store
from crosstalk.wire.room_ops import MessageOp
from tests.actors.test_room_hold import ANA, BEN, ROOM, _inbound, _sealed, room_store


async def test_bell_rings_once_for_many_rings_and_never_blocks() -> None:
    """Any number of rings before a wait count as one; ring never waits."""
    bell = Doorbell()
    for _ in range(1000):
        bell.ring()
    assert bell.pending()
    await bell.wait()
    assert not bell.pending()


async def test_an_op_is_applied_while_the_rooms_inbox_is_full_of_sends() -> None:
    """Sends pile up (the link does not take them), filling the room's inbox; an inbound op
    committed meanwhile is still applied once the bell rings. A Wake message would have waited
    behind the sends (the router used to drop it when the inbox was full)."""
    async with room_store() as store:
        await _fill_inbox_then_apply(store)


async def _fill_inbox_then_apply(store: Store) -> None:
    applied = trio.Event()

    def record(_conn: sqlite3.Connection, entry: Applied) -> None:
        if entry.op_id == "b1":
            applied.set()  # appliers run inline, on trio's thread

    link_send, link_receive = trio.open_memory_channel[LinkCommand](0)  # nobody reads it
    bell = Doorbell()
    async with link_receive, trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        actor = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[record], doorbell=bell,
        )
        inbox = await supervisor.start_actor("room", actor, inbox_size=2)
        reply_send, _reply_receive = trio.open_memory_channel[str | CrosstalkError](100)
        with trio.fail_after(10):
            while True:  # fill it: the outbound side is stuck posting the first send
                try:
                    inbox.send_nowait(SendOp(f"s{id(object())}", MessageOp("x", "x"), reply_send))
                except trio.WouldBlock:
                    break
                await trio.lowlevel.checkpoint()
        await store.write(_inbound((1, "b1", BEN, _sealed(BEN, "b1"))))
        bell.ring()
        with trio.fail_after(10):
            await applied.wait()
        nursery.cancel_scope.cancel()
