"""The fan-out of applied ops: a subscriber that stalls does not stall the room's applying, a
BLOCK subscriber still gets every batch in order, a COALESCE one is rung and never waited for."""

from __future__ import annotations

import sqlite3

import trio
import trio.testing

from crosstalk.actors.doorbell import Doorbell
from crosstalk.actors.fanout import BUFFER, FanOut, Policy, Subscriber, coalescing
from crosstalk.actors.relay_client import RelayClient
from crosstalk.actors.relay_link import LinkCommand, LinkTimings
from crosstalk.actors.room import RoomActor
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.wire.room_ops import MessageOp
from tests.actors.fakes import running
from tests.actors.test_room_hold import ANA, BEN, ROOM, _inbound, _sealed, room_store

OPS = 5


class Stalled:
    """A BLOCK subscriber that takes its first batch, then waits for ``release``."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []
        self.release = trio.Event()
        self.took_first = trio.Event()

    async def listener(self, applied: list[Applied]) -> None:
        self.batches.append([a.op_id for a in applied])
        self.took_first.set()
        await self.release.wait()


async def test_a_stalled_subscriber_does_not_stall_the_rooms_applying_and_loses_nothing() -> None:
    """The gate-like subscriber stalls on the first batch; the room applies four more ops
    meanwhile, a prompt subscriber hears each, and once released the stalled one gets all five
    batches in order, each once."""
    stalled, page_rung = Stalled(), trio.Event()
    prompt_send, prompt_receive = trio.open_memory_channel[list[str]](100)

    async def prompt(applied: list[Applied]) -> None:
        prompt_send.send_nowait([a.op_id for a in applied])

    async def page() -> None:
        page_rung.set()
        await trio.sleep_forever()  # a coalescing subscriber that never comes back

    applied_send, applied_receive = trio.open_memory_channel[str](100)

    def applier(_conn: sqlite3.Connection, entry: Applied) -> None:
        applied_send.send_nowait(entry.op_id)  # appliers run inline, on trio's thread

    subscribers = [
        Subscriber("gate", stalled.listener, Policy.BLOCK),
        Subscriber("receipts", prompt, Policy.BLOCK),
        coalescing("page", page),
    ]
    link_send, link_receive = trio.open_memory_channel[LinkCommand](0)
    async with room_store() as store, link_receive, running(Supervisor(heartbeat=5.0)) as sup:
        fanout = await sup.start_actor("fanout", FanOut(subscribers), inbox_size=4)
        bell = Doorbell()
        room = RoomActor(
            room_id=ROOM, store=store, keys=ANA, relay=RelayClient(link_send, LinkTimings()),
            appliers=[applier], on_applied=fanout.send, doorbell=bell,
        )
        await sup.start_actor("room", room)
        with trio.fail_after(10):
            for n in range(1, OPS + 1):
                op_id = f"b{n}"
                await store.write(_inbound((n, op_id, BEN, _sealed(BEN, op_id))))
                bell.ring()
                assert await applied_receive.receive() == op_id  # the room applied it
                assert await prompt_receive.receive() == [op_id]
            await stalled.took_first.wait()
            await page_rung.wait()
        assert stalled.batches == [["b1"]]
        stalled.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert stalled.batches == [[f"b{n}"] for n in range(1, OPS + 1)]
        assert {h.name: h.restarts for h in sup.statistics()} == {"fanout": 0, "room": 0}


async def test_a_full_blocking_lane_makes_the_fanout_wait_not_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A BLOCK subscriber stalled for many heartbeats with its lane full: the fan-out waits
    (backpressure) but is never cancelled by the watchdog, and a COALESCE subscriber is rung
    for the batches it waits behind; on release every batch arrives, in order."""
    stalled = Stalled()
    rings: list[float] = []

    async def nudged() -> None:
        rings.append(trio.current_time())

    batches = BUFFER + 3
    subscribers = [coalescing("page", nudged), Subscriber("gate", stalled.listener)]
    async with running(Supervisor(heartbeat=1.0)) as sup:
        fanout = await sup.start_actor("fanout", FanOut(subscribers), inbox_size=1)
        for n in range(batches):
            await fanout.send([_applied(n)])
        await trio.sleep(10.0)  # ten heartbeats with the lane full
        assert [h.restarts for h in sup.statistics()] == [0]
        assert rings  # rung while the gate lane is full
        stalled.release.set()
        await trio.testing.wait_all_tasks_blocked()
        assert stalled.batches == [[f"op{n}"] for n in range(batches)]
        assert [h.restarts for h in sup.statistics()] == [0]


async def test_a_batch_is_in_every_lane_before_the_first_subscriber_runs() -> None:
    """The first subscriber, as it is called for a batch, finds that batch in the last lane
    already: the fan-out does not yield between lanes. The last subscriber is kept busy with
    batch 0, so each later batch waits in its lane where it can be counted (a lane whose task
    waits on it takes the batch straight from the send, counted nowhere). Awaiting each lane in
    turn (the planted bug) lets the first subscriber run before the last lane has the batch in
    about half of Trio's schedules; ten batches make missing it unlikely (1 in 1,024)."""
    release = trio.Event()
    seen_by_first: list[int] = []

    async def first(applied: list[Applied]) -> None:
        seen_by_first.append(fanout.statistics()["last"])

    async def last(applied: list[Applied]) -> None:
        await release.wait()

    fanout = FanOut([Subscriber("first", first), Subscriber("last", last)])
    async with running(Supervisor(heartbeat=5.0)) as sup:
        inbox = await sup.start_actor("fanout", fanout)
        await trio.testing.wait_all_tasks_blocked()
        await inbox.send([_applied(0)])
        await trio.testing.wait_all_tasks_blocked()  # last is inside batch 0 now
        for n in range(1, 11):
            await inbox.send([_applied(n)])
            await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert seen_by_first[1:] == list(range(1, 11))


def _applied(n: int) -> Applied:
    return Applied(ROOM, n, f"op{n}", BEN.fingerprint, 0.0, MessageOp(msg_id=f"op{n}", text="x"))
