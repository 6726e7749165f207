"""The relay-link actor on the autojump clock against an in-memory relay (the real relay core)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio
import trio.testing

from crosstalk import crypto
from crosstalk.actors.relay_link import (
    Committed,
    InboundOp,
    LinkDown,
    LinkUp,
    OpSent,
    RelayPush,
    Request,
    RetryNow,
)
from crosstalk.actors.relay_socket import Closed, FrameIn
from crosstalk.errors import CrosstalkError, RelayUnreachable
from crosstalk.features.membership.history import create_frame
from crosstalk.wire import relay as w
from tests.actors.test_relay_link_fakes import (
    URL,
    FakeRelay,
    MemoryLinkStore,
    Running,
    next_event,
    run_link,
)

ALICE = crypto.Keys(b"\x11" * 32, b"\x12" * 32)


async def ask(running: Running, frame: w.ClientFrame) -> w.RelayFrame | CrosstalkError:
    send, receive = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
    await running.inbox.send(Request(frame, send))  # type: ignore[arg-type]  # a request frame
    with trio.fail_after(60):
        return await receive.receive()


async def post(running: Running, room: str, op_id: str, body: bytes) -> bool:
    """What a room's send does: commit the post to the outbox, then hand it to the link."""
    assert running.store is not None
    item = await running.store.queue_post(room, op_id, body)
    if item is None:
        return False
    await running.inbox.send(Committed((item,), trio.current_time()))
    return True


async def create_room(running: Running, keys: crypto.Keys, room: str) -> None:
    create, _ = create_frame(keys, room)
    assert isinstance(await ask(running, create), w.Ok)


def restarts(running: Running) -> int:
    return running.supervisor.statistics()[0].restarts


@asynccontextmanager
async def two_devices(
    store_b: MemoryLinkStore, ring_b: Callable[[str], bool] | None = None,
) -> AsyncIterator[tuple[FakeRelay, Running, Running]]:
    """ALICE's devices dev-a and dev-b (with ``store_b``) up on one fake relay, in room-1."""
    relay = FakeRelay()
    async with (
        run_link(relay, MemoryLinkStore(), ALICE, device="dev-a") as a,
        run_link(relay, store_b, ALICE, device="dev-b", ring=ring_b) as b,
    ):
        await next_event(a, LinkUp)
        await next_event(b, LinkUp)
        await create_room(a, ALICE, "room-1")
        yield relay, a, b


async def test_link_authenticates_and_pins_the_relay_key_on_first_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With no pin, the link pins the relay's key, resumes and reports LinkUp at once."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        up = await next_event(running, LinkUp)
        assert isinstance(up, LinkUp) and up.relay_key == relay.pub
        assert trio.current_time() == 0.0
        assert store.pins == {URL: relay.pub}
        hello = relay.frames(w.Hello)[0].frame
        assert isinstance(hello, w.Hello) and hello.ed_pub == ALICE.ed_pub
        status = running.link.statistics()
        assert status.connected and status.relay_key == relay.pub.hex()
        assert [type(h.frame) for h in relay.heard] == [w.Hello, w.Resume]


async def test_a_relay_with_another_key_at_a_pinned_url_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A mismatched key: no hello is ever sent, the status says why, the link keeps away."""
    relay = FakeRelay()
    store = MemoryLinkStore(pinned={URL: b"\x01" * 32})
    async with run_link(relay, store, ALICE) as running:
        down = await next_event(running, LinkDown)
        assert isinstance(down, LinkDown) and "will not talk to it" in down.reason
        await trio.sleep(10)
        assert relay.heard == []
        status = running.link.statistics()
        assert not status.connected
        assert status.last_error is not None and "pinned" in status.last_error
        assert store.pins == {URL: b"\x01" * 32}
        assert relay.connects == [0.0, 0.5, 1.5, 3.5, 7.5]


async def test_reconnects_follow_the_jittered_backoff_at_exact_times(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With jitter fraction 1 the waits are 1, 2, 4, 8, 16, 30, 30 s; no actor restart."""
    relay, store = FakeRelay(), MemoryLinkStore()
    relay.accepting = False
    async with run_link(relay, store, ALICE, fraction=1.0) as running:
        await trio.sleep(100)
        assert relay.connects == [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 61.0, 91.0]
        relay.accepting = True
        await next_event(running, LinkUp)
        assert trio.current_time() == 121.0
        assert restarts(running) == 0


async def test_retry_now_connects_at_once_instead_of_waiting_out_the_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """In the middle of a 30 s wait, RetryNow (the relay is back) connects at that instant."""
    relay, store = FakeRelay(), MemoryLinkStore()
    relay.accepting = False
    async with run_link(relay, store, ALICE, fraction=1.0) as running:
        await trio.sleep(70)  # the attempt at 61 s failed; the next would be at 91 s
        relay.accepting = True
        await running.inbox.send(RetryNow())
        await next_event(running, LinkUp)
        assert relay.connects[-2:] == [61.0, 70.0]
        assert trio.current_time() == 70.0
        assert restarts(running) == 0


async def test_the_outbox_is_flushed_in_order_after_a_reconnect(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Posts queued while the relay is away go out in order on reconnect and come back sent."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        relay.accepting = False
        relay.drop_all()
        await next_event(running, LinkDown)
        for n in range(1, 4):
            assert await post(running, "room-1", f"op-{n}", b"sealed")
        assert relay.frames(w.Post) == []
        relay.accepting = True
        sent = [await next_event(running, OpSent) for _ in range(3)]
        assert sent == [OpSent("room-1", f"op-{n}", n) for n in range(1, 4)]
        posts = [h.frame for h in relay.frames(w.Post)]
        assert [p.op_id for p in posts if isinstance(p, w.Post)] == ["op-1", "op-2", "op-3"]
        assert [row.state for row in store.outbox.values()] == ["sent"] * 3


async def test_an_inbound_op_is_acknowledged_only_after_its_commit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The relay hears the ack at the instant the commit finished, never before; resume then
    carries the committed cursor."""
    store_b = MemoryLinkStore(commit_delay=1.5)
    async with two_devices(store_b) as (relay, a, b):
        started = trio.current_time()
        assert await post(a, "room-1", "op-1", b"sealed")
        op = await next_event(b, InboundOp)
        assert op == InboundOp("room-1", 1, ALICE.fingerprint, "op-1", b"sealed", op.relay_ts)
        await trio.testing.wait_all_tasks_blocked()
        committed = [t for t, what in store_b.commits if what == "inbound room-1 1"]
        acks = relay.frames(w.Ack, device="dev-b")
        assert len(committed) == 1 and len(acks) == 1
        assert acks[0].at == committed[0] == started + 1.5
        relay.drop_all()
        await next_event(b, LinkDown)
        await next_event(b, LinkUp)
        resumes = [h.frame for h in relay.frames(w.Resume, device="dev-b")]
        assert isinstance(resumes[-1], w.Resume) and resumes[-1].cursors == {"room-1": 1}


async def test_a_frozen_relay_is_noticed_by_the_ping_timeout_and_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No pong: the ping sent at 2 s times out at 4 s, the link reconnects at 4.5 s."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        relay.frozen = True
        down = await next_event(running, LinkDown)
        assert isinstance(down, LinkDown) and "no pong" in down.reason
        assert trio.current_time() == 4.0
        relay.frozen = False
        await next_event(running, LinkUp)
        assert relay.connects == [0.0, 4.5]
        assert restarts(running) == 0


async def test_a_request_while_the_relay_is_away_fails_at_its_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Not connected: the request waits for READY, then RelayUnreachable at exactly its timeout."""
    relay, store = FakeRelay(), MemoryLinkStore()
    relay.accepting = False
    async with run_link(relay, store, ALICE) as running:
        send, receive = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
        await running.inbox.send(Request(w.ListRooms(0), send, timeout=3.0))
        answer = await receive.receive()
        assert isinstance(answer, RelayUnreachable)
        assert "connection refused" in answer.message
        assert trio.current_time() == 3.0


async def test_a_request_made_during_a_blip_is_answered_once_reconnected(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request held while reconnecting goes out after resume and gets its reply."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        relay.drop_all()
        await next_event(running, LinkDown)
        reply = await ask(running, w.ListRooms(0))
        assert isinstance(reply, w.RoomList) and reply.rooms == []
        assert trio.current_time() == 0.5


async def test_pushes_reach_the_events_channel(autojump_clock: trio.testing.MockClock) -> None:
    """A roster push after create is delivered as a RelayPush."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        push = await next_event(running, RelayPush)
        assert isinstance(push, RelayPush) and isinstance(push.frame, w.Roster)
        assert push.frame.room == "room-1"
        assert store.cursors == {"room-1": 0}


async def test_stopping_the_link_answers_waiting_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request waiting for a connection is answered RelayUnreachable when the actor stops."""
    relay, store = FakeRelay(), MemoryLinkStore()
    relay.accepting = False
    async with run_link(relay, store, ALICE) as running:
        send, receive = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
        await running.inbox.send(Request(w.ListRooms(0), send, timeout=60.0))
        await trio.sleep(1.0)
        await running.supervisor.stop_actor("relay-link")
        answer = receive.receive_nowait()
        assert isinstance(answer, RelayUnreachable) and "stopped" in answer.message
        assert trio.current_time() == 1.0


async def test_a_committed_post_goes_out_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The link is handed a post after its outbox commit; the relay hears it at that instant."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        store.commit_delay = 1.0
        start = trio.current_time()
        assert await post(running, "room-1", "op-1", b"sealed")
        assert [t for t, what in store.commits if what == "queue op-1"] == [start + 1.0]
        await next_event(running, OpSent)
        [heard] = relay.frames(w.Post)
        assert heard.at == start + 1.0


async def test_a_post_handed_over_after_a_restart_that_loaded_it_goes_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A restart between a post's commit and its hand-over: the new instance loads the row and
    posts it; the late hand-over is ignored (its id is up to the loaded outbox_through), even
    once the row has left the outbox."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        await running.supervisor.stop_actor("relay-link")
    item = await store.queue_post("room-1", "op-1", b"sealed")
    assert item is not None
    async with run_link(relay, store, ALICE) as running:
        assert await next_event(running, OpSent) == OpSent("room-1", "op-1", 1)
        await running.inbox.send(Committed((item,), trio.current_time()))
        await trio.testing.wait_all_tasks_blocked()
        assert [h.frame.op_id for h in relay.frames(w.Post)] == ["op-1"]  # type: ignore[attr-defined]


async def test_an_outbox_left_by_a_previous_run_is_flushed_in_order_at_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Rows queued before a restart go out in id order as soon as the link is READY."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        await running.supervisor.stop_actor("relay-link")
    for n in (1, 2, 3):
        await store.queue_post("room-1", f"op-{n}", b"sealed")
    async with run_link(relay, store, ALICE) as running:
        sent = [await next_event(running, OpSent) for _ in range(3)]
        assert [(s.op_id, s.seq) for s in sent] == [("op-1", 1), ("op-2", 2), ("op-3", 3)]


async def test_a_relay_sending_garbage_is_dropped_and_rejoined_after_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A frame that is not JSON ends the connection with that reason; the link is back at 0.5 s."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        relay.inject("{not json")
        down = await next_event(running, LinkDown)
        assert "not JSON" in down.reason
        await next_event(running, LinkUp)
        assert relay.connects == [0.0, 0.5]
        assert restarts(running) == 0


async def test_ops_that_arrive_during_a_commit_share_the_next_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Group commit: three ops pushed while the first one's commit runs are committed together
    in one transaction, and each is acknowledged at the instant that commit finished."""
    store_b = MemoryLinkStore(commit_delay=1.5)
    async with two_devices(store_b) as (relay, a, b):
        started = trio.current_time()
        assert await post(a, "room-1", "op-1", b"one")
        await trio.sleep(0.5)  # the scenario: the others come while op-1's commit runs
        for n in (2, 3, 4):
            assert await post(a, "room-1", f"op-{n}", b"more")
        arrived = [await next_event(b, InboundOp) for _ in range(4)]
        await trio.testing.wait_all_tasks_blocked()
        inbound = [(t, what) for t, what in store_b.commits if what.startswith("inbound")]
        assert inbound == [
            (started + 1.5, "inbound room-1 1"),
            (started + 3.0, "inbound room-1 2, room-1 3, room-1 4"),
        ]
        assert [op.seq for op in arrived] == [1, 2, 3, 4]
        acks = relay.frames(w.Ack, device="dev-b")
        assert [(h.at, h.frame.seq) for h in acks if isinstance(h.frame, w.Ack)] == [
            (started + 1.5, 1), (started + 3.0, 2), (started + 3.0, 3), (started + 3.0, 4),
        ]


async def test_ops_stay_in_order_when_another_task_carries_out_events_during_a_commit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request made while a slow commit of op 1 runs must not commit ops 2 and 3 (which arrived
    meanwhile) ahead of it: inbound commits run one after another and ops are handed on in seq
    order (the room actor applies whatever follows its cursor, so a later op handed on first
    would make it step over the earlier one for good)."""
    store_b = MemoryLinkStore(inbound_delays=[2.0, 0.1])
    async with two_devices(store_b) as (_, a, b):
        started = trio.current_time()
        assert await post(a, "room-1", "op-1", b"one")
        await trio.sleep(0.5)  # op 1's commit at dev-b is under way
        for n in (2, 3):
            assert await post(a, "room-1", f"op-{n}", b"more")
        await trio.sleep(0.1)
        assert isinstance(await ask(b, w.ListRooms(0)), w.RoomList)
        arrived = [await next_event(b, InboundOp) for _ in range(3)]
        assert [op.seq for op in arrived] == [1, 2, 3]
        inbound = [(t, what) for t, what in store_b.commits if what.startswith("inbound")]
        assert inbound == [
            (started + 2.0, "inbound room-1 1"),
            (started + 2.1, "inbound room-1 2, room-1 3"),
        ]


async def test_a_commit_under_way_when_the_connection_drops_finishes_and_later_ops_follow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The connection ends while op 1's commit runs and ops 2 and 3 have already arrived: the
    commit is not cut short (the driver outlives connections), ops 2 and 3 are committed next,
    together, nothing is skipped or handed on twice, and the resume that follows carries the
    cursor of all three."""
    store_b = MemoryLinkStore(inbound_delays=[2.0])
    async with two_devices(store_b) as (relay, a, b):
        started = trio.current_time()
        assert await post(a, "room-1", "op-1", b"one")
        await trio.sleep(0.5)  # op 1's commit at dev-b is under way
        for n in (2, 3):
            assert await post(a, "room-1", f"op-{n}", b"more")
        await trio.sleep(0.1)
        relay.drop_all()
        arrived = [await next_event(b, InboundOp) for _ in range(3)]
        assert [op.seq for op in arrived] == [1, 2, 3]
        assert sorted(op.seq for op in store_b.inbound.values()) == [1, 2, 3]
        inbound = [(t, what) for t, what in store_b.commits if what.startswith("inbound")]
        assert inbound == [
            (started + 2.0, "inbound room-1 1"), (started + 2.0, "inbound room-1 2, room-1 3"),
        ]
        await next_event(b, LinkUp)
        resumes = [h.frame for h in relay.frames(w.Resume, device="dev-b")]
        assert isinstance(resumes[-1], w.Resume) and resumes[-1].cursors == {"room-1": 3}
        while True:  # nothing is handed on twice, though the relay replays ops 2 and 3
            with trio.move_on_after(5.0):
                event = await b.events.receive()
                assert not isinstance(event, InboundOp), event
                continue
            break


async def test_what_an_earlier_instances_dialer_left_in_the_inbox_is_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The inbox is the driver's input channel and outlives instances: a frame or a close from a
    connection of an instance before a restart says nothing about the current one."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        gone = object()  # an earlier instance's dialer
        await running.inbox.send(FrameIn("{not json", gone))  # type: ignore[arg-type]
        await running.inbox.send(Closed("an old connection ended", gone))  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        assert running.link.statistics().connected
        assert relay.connects == [0.0]
        await create_room(running, ALICE, "room-1")  # and the link still serves


async def test_a_send_that_hangs_ends_the_connection_at_the_send_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A frame the socket does not take within ``send_timeout`` (10 s) ends the connection at
    that instant, and the link dials again; the actor itself is not restarted."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        relay.sends_hang = True
        start = trio.current_time()
        create, _ = create_frame(ALICE, "room-1")
        reply, _answer = trio.open_memory_channel[w.RelayFrame | CrosstalkError](1)
        await running.inbox.send(Request(create, reply))
        down = await next_event(running, LinkDown)
        assert "took longer than 10 s" in down.reason
        assert trio.current_time() == start + 10.0
        relay.sends_hang = False
        await next_event(running, LinkUp)
        assert restarts(running) == 0


async def test_an_idle_connection_outlives_the_send_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The writer's bound is armed only while a frame is being sent: a minute with nothing to
    send, after a frame, does not end the connection."""
    relay, store = FakeRelay(), MemoryLinkStore()
    async with run_link(relay, store, ALICE) as running:
        await next_event(running, LinkUp)
        await create_room(running, ALICE, "room-1")
        await trio.sleep(60.0)
        assert relay.connects == [0.0]
        assert running.link.statistics().connected


async def test_a_running_rooms_ops_ring_its_doorbell_and_go_nowhere_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once committed, ops of a room whose actor runs ring its doorbell, once per batch (no
    InboundOp through the router); a room with no running actor hears of each op as before."""
    rung: list[str] = []

    def ring(room: str) -> bool:
        rung.append(room)
        return room == "room-1"

    store_b = MemoryLinkStore(commit_delay=1.0)
    async with two_devices(store_b, ring) as (_relay, a, b):
        assert await post(a, "room-1", "op-1", b"one")
        await next_event(a, OpSent)
        for n in (2, 3):  # both arrive while op-1's commit runs: one batch
            assert await post(a, "room-1", f"op-{n}", b"more")
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(5.0)
        assert rung == ["room-1", "room-1"]
        assert store_b.cursors["room-1"] == 3
        while True:
            try:
                event = b.events.receive_nowait()
            except trio.WouldBlock:
                break
            assert not isinstance(event, InboundOp), event
