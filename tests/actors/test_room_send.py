"""A room seals its sends and commits them to the outbox itself: the sends waiting together share
one commit, each answered after it, and the link is handed the committed rows at once."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio
import trio.testing

from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import Committed, LinkCommand, LinkTimings
from crosstalk.actors.room import RoomActor, RoomInput
from crosstalk.actors.room_send import Answer, Sender, SendOp
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import CrosstalkError, UnknownRoom
from crosstalk.store.db import Store, run_inline
from crosstalk.store.settings import get_setting
from crosstalk.wire.room_ops import MessageOp
from tests.actors.fakes import running
from tests.actors.test_room_hold import ANA, ROOM, room_store


class _DurableWrites:
    """The store's runner, counting fsynced write transactions (a room's catch-up is not)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, fn: Callable[..., Any], *args: Any, limiter: Any = None) -> Any:
        if fn.__name__ == "_run_write" and args[2]:  # (conn, fn, durable)
            self.count += 1
        return await run_inline(fn, *args, limiter=limiter)


def _send(op_id: str, replies: trio.MemorySendChannel[Answer], **kw: object) -> SendOp:
    return SendOp(op_id, MessageOp(msg_id=op_id, text="hi"), replies, **kw)  # type: ignore[arg-type]


async def _outbox(store: Store) -> list[str]:
    rows = await store.read(lambda conn: conn.execute(
        "SELECT op_id FROM outbox ORDER BY id").fetchall())
    return [str(row[0]) for row in rows]


async def _run_room(
    store: Store, sends: Sequence[SendOp]
) -> list[LinkCommand]:
    """Start the room's actor with ``sends`` already in its inbox; what the link was handed."""
    link_send, link_receive = trio.open_memory_channel[LinkCommand](10)
    inbox = trio.open_memory_channel[RoomInput](16)
    for item in sends:
        inbox[0].send_nowait(item)
    actor = RoomActor(room_id=ROOM, store=store, keys=ANA,
                      relay=RelayClient(link_send, LinkTimings()))
    async with running(Supervisor(heartbeat=5.0)) as sup:
        await sup.start_actor("room", actor, channel=inbox)
        await trio.testing.wait_all_tasks_blocked()
    handed = []
    while True:
        try:
            handed.append(link_receive.receive_nowait())
        except trio.WouldBlock:
            return handed


async def test_sends_waiting_together_share_one_commit_and_one_hand_over() -> None:
    """Three sends in the inbox: one write transaction, each sender answered, one Committed
    with the three rows in order. One whose epoch has no key fails alone."""
    writes = _DurableWrites()
    replies, answers = trio.open_memory_channel[Answer](10)
    sends = [_send("m1", replies), _send("m2", replies, epoch=7), _send("m3", replies)]
    async with room_store(writes) as store:
        before = writes.count
        handed = await _run_room(store, sends)
        assert writes.count - before == 1
        got = [answers.receive_nowait() for _ in sends]
        assert got[0] == "m1" and got[2] == "m3"
        assert isinstance(got[1], UnknownRoom)
        [committed] = handed
        assert isinstance(committed, Committed)
        assert [item.op_id for item in committed.items] == ["m1", "m3"]
        assert await _outbox(store) == ["m1", "m3"]


async def test_what_a_send_also_writes_is_committed_with_it_or_not_at_all() -> None:
    """``also`` runs in the outbox's transaction: when it raises (a bug), nothing of the batch
    is queued and every sender hears an error instead of waiting; when it does not, it is
    committed with the row."""

    def note(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO settings (key, value) VALUES ('noted', '\"m1\"')")

    def broken(conn: sqlite3.Connection) -> None:
        note(conn)
        raise RuntimeError("a writer's bug")

    replies, answers = trio.open_memory_channel[Answer](10)
    async with room_store() as store:
        with pytest.raises(RuntimeError):
            await _sender(store).send([_send("m0", replies), _send("m1", replies, also=broken)])
        assert all(isinstance(answers.receive_nowait(), CrosstalkError) for _ in range(2))
        assert await _outbox(store) == []
        await _sender(store).send([_send("m1", replies, also=note)])
        assert answers.receive_nowait() == "m1"
        assert await _outbox(store) == ["m1"]
        assert await store.read(lambda conn: get_setting(conn, "noted")) == "m1"


def _sender(store: Store) -> Sender:
    link_send, _link_receive = trio.open_memory_channel[LinkCommand](10)
    return _sender_on(store, link_send)


async def test_rows_committed_before_a_room_is_cancelled_still_reach_the_link() -> None:
    """The senders heard ``queued`` and the rows are durable: a room cancelled while the link's
    inbox is full still hands them over once the link takes them."""
    link_send, link_receive = trio.open_memory_channel[LinkCommand](0)  # full: nobody reads yet
    replies, answers = trio.open_memory_channel[Answer](10)
    async with room_store() as store, trio.open_nursery() as nursery:
        room = _sender_on(store, link_send)
        scope = trio.CancelScope()

        async def send() -> None:
            with scope:
                await room.send([_send("m1", replies)])

        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        assert answers.receive_nowait() == "m1"
        scope.cancel()
        with trio.fail_after(5):
            handed = await link_receive.receive()
        assert isinstance(handed, Committed)
        assert [item.op_id for item in handed.items] == ["m1"]


def _sender_on(store: Store, link: trio.MemorySendChannel[LinkCommand]) -> Sender:
    return Sender(ROOM, store, ANA, RelayClient(link, LinkTimings()), lambda n: b"\0" * n)
