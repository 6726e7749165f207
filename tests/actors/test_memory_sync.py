"""The memory-sync actor with a fake store and a fake room: asking, retrying, answering, probing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio
import trio.testing

from crosstalk import crypto
from crosstalk.actors.memory_sync import (
    JOURNAL_MAX,
    PROBE_EVERY,
    RETRY_AFTER,
    MemorySync,
    probe,
)
from crosstalk.actors.memory_sync_api import (
    Answer,
    MemorySyncInput,
    Nudge,
    Probed,
    Resumed,
    SnapshotSeen,
    StoreView,
    WatchOwn,
)
from crosstalk.actors.memory_sync_store import StoreAdapter
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.memory import MemoryState
from crosstalk.core.memory_sync import OurMemory
from crosstalk.core.memory_transfer import signed_message, unpack_snapshot
from crosstalk.store.db import open_store
from crosstalk.store.link import commit_inbound
from crosstalk.store.memory import MemoryCursor
from crosstalk.store.memory_log import MemoryFollower
from crosstalk.store.rooms import Room, RoomMember, add_member, add_room
from crosstalk.wire import relay as w
from crosstalk.wire.memory import FactAdd, MemorySnapshot, OpContext, Outcome, OutcomeCode
from crosstalk.wire.room_ops import RoomOp, SyncChunk, SyncRequest
from tests.actors.fakes import running

ROOM = "room-1"
ME = crypto.Keys(b"m" * 32, b"M" * 32)
BEN = crypto.Keys(b"b" * 32, b"B" * 32)
CY = crypto.Keys(b"c" * 32, b"C" * 32)
EVE = crypto.Keys(b"e" * 32, b"E" * 32)
Posted = tuple[float, str, RoomOp]


class FakeStore:
    """An in-memory SyncStore: one room, a hole unless ``filled``, a memory state."""

    def __init__(self, *, hole: bool) -> None:
        self.hole = hole
        self.requests: list[tuple[str, str | None]] = []
        self.state = MemoryState(ROOM)
        ctx = OpContext(seq=1, op_id="op-1", sender=ME.fingerprint, sender_label="me", ts=5.0)
        self.state.apply(FactAdd("f1", "uploads retry " * 2000), ctx)
        self.outcomes: dict[str, Outcome] = {}
        self.reported: list[str] = []
        self.advanced: list[str] = []
        self.joined = [ROOM]
        self.roster = [ME.fingerprint, BEN.fingerprint, CY.fingerprint]
        self.held = 5  # the first seq after our hole that we hold
        self.conceded: list[tuple[float, str]] = []
        self.gave_up = False  # our memory gave a hole up (conceded)
        self.journaled: int | None = None  # ops in the repair journal (None: not repairing)
        self.dropped: list[str] = []

    async def rooms(self) -> list[str]:
        return list(self.joined)

    async def members(self, room: str) -> list[str]:
        return list(self.roster)

    async def inviter(self, room: str) -> str | None:
        return None

    async def cursor(self, room: str) -> MemoryCursor:
        return MemoryCursor(room, self.state.last_seq, 2 if self.hole else None)

    async def received_through(self, room: str) -> int:
        return self.state.last_seq

    async def view(self) -> StoreView:
        repairing = () if self.hole or self.journaled is None else ((ROOM, self.journaled),)
        return StoreView(tuple(self.joined), (ROOM,) if self.hole else (), repairing)

    async def ours(self, room: str) -> OurMemory:
        return OurMemory(self.hole, self.held if self.hole else None, self.gave_up)

    async def note_request(self, room: str, request_id: str, asked: str | None) -> None:
        self.requests.append((request_id, asked))

    async def snapshot(self, room: str) -> tuple[MemorySnapshot, bool] | None:
        return None if self.hole else (self.state.snapshot(), self.gave_up)

    async def drop_journal(self, room: str) -> None:
        self.dropped.append(room)
        self.journaled = None

    async def advance(self, room: str) -> None:
        self.advanced.append(room)

    async def held_from(self, room: str) -> int | None:
        return self.held if self.hole else None

    async def concede(self, room: str) -> None:
        self.conceded.append((trio.current_time(), room))
        self.hole = False

    async def unreported(self) -> list[tuple[str, str, str]]:
        return [(ROOM, op_id, "TaskClaim") for op_id in self.outcomes if op_id not in self.reported]

    async def outcome(self, room: str, op_id: str) -> Outcome | None:
        return self.outcomes.get(op_id)

    async def mark_reported(self, op_id: str) -> None:
        self.reported.append(op_id)


class FakeRoom:
    """Records posted ops with their virtual time; ``sequence`` releases a watched op."""

    def __init__(self, online: dict[str, bool]) -> None:
        self.online = online
        self.posted_send, self.posted = trio.open_memory_channel[Posted](64)
        self.sequenced: dict[str, trio.Event] = {}
        self.refused: set[str] = set()
        self.count = 0
        self.relay_up = False  # True: the relay sequences each op as soon as it is posted
        self.relay_refuses = False  # True: it refuses each (we were removed from the room)

    async def send_op(self, room: str, op: RoomOp) -> str:
        self.count += 1
        op_id = f"mine-{self.count}"
        self.posted_send.send_nowait((trio.current_time(), room, op))
        if self.relay_refuses:
            self.refuse(op_id)
        elif self.relay_up:
            self.sequence(op_id)
        return op_id

    async def presence(self) -> dict[str, bool]:
        return dict(self.online)

    async def wait_sent(self, op_id: str) -> bool:
        await self.sequenced.setdefault(op_id, trio.Event()).wait()
        return op_id not in self.refused

    def refuse(self, op_id: str) -> None:
        self.refused.add(op_id)
        self.sequence(op_id)

    def sequence(self, op_id: str) -> None:
        self.sequenced.setdefault(op_id, trio.Event()).set()

    async def next(self, within: float = 60.0) -> Posted:
        with trio.fail_after(within):
            return await self.posted.receive()


def actor(store: FakeStore, room: FakeRoom) -> MemorySync:
    return MemorySync(
        keys=ME, store=store, send_op=room.send_op, presence=room.presence,
        wait_sent=room.wait_sent,
    )


async def start(
    supervisor: Supervisor, store: FakeStore, room: FakeRoom
) -> trio.MemorySendChannel[MemorySyncInput]:
    return await supervisor.start_actor("memory_sync", actor(store, room))


async def test_a_hole_asks_one_online_member_then_the_next_after_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At start it asks one online member; with no snapshot by RETRY_AFTER it asks the other."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True, CY.fingerprint: True})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        await start(supervisor, store, room)
        first_at, _, first = await room.next()
        second_at, _, second = await room.next()
    assert isinstance(first, SyncRequest) and isinstance(second, SyncRequest)
    assert (first_at, second_at) == (0.0, RETRY_AFTER)
    assert {first.ask, second.ask} == {BEN.fingerprint, CY.fingerprint}
    assert first.have == 1 and first.request_id != second.request_id
    assert store.requests == [(first.request_id, first.ask), (second.request_id, second.ask)]


async def test_asks_go_round_the_online_members_again_and_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Round after round, each online member in turn: one that refused while it had a hole of
    its own may have filled it since (sim seed 1683: asking the first again and again, two
    members asked only each other for ever)."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True, CY.fingerprint: True})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        await start(supervisor, store, room)
        asks = [(await room.next())[2] for _ in range(5)]
    asked = [a.ask for a in asks if isinstance(a, SyncRequest)]
    first, second = sorted([BEN.fingerprint, CY.fingerprint])
    assert asked == [first, second, first, second, first]


async def test_with_nobody_online_nothing_is_posted_until_someone_is(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No member online: no request; once one is, the next retry asks them."""
    store, room = FakeStore(hole=True), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        await start(supervisor, store, room)
        with trio.move_on_after(RETRY_AFTER - 1):
            got = await room.next()
            raise AssertionError(f"nothing should be posted yet, got {got}")
        room.online[CY.fingerprint] = True
        at, _, request = await room.next()
    assert at == RETRY_AFTER
    assert isinstance(request, SyncRequest) and request.ask == CY.fingerprint


async def test_a_filled_hole_stops_the_retries(autojump_clock: trio.testing.MockClock) -> None:
    """Once the store has no hole, a nudge ends the asking: nothing more is posted."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await room.next()
        store.hole = False
        await inbox.send(Nudge((ROOM,)))
        with trio.move_on_after(RETRY_AFTER * 4):
            got = await room.next()
            raise AssertionError(f"no more requests expected, got {got}")
    assert store.advanced == [ROOM]


async def test_an_answer_is_our_snapshot_in_signed_pieces(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The pieces carry one signature over the digest, and reassemble to our exact snapshot."""
    store, room = FakeStore(hole=False), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Answer(ROOM, "req-1", BEN.fingerprint))
        first = (await room.next())[2]
        assert isinstance(first, SyncChunk)
        chunks = [first] + [(await room.next())[2] for _ in range(first.count - 1)]
    assert all(isinstance(c, SyncChunk) for c in chunks)
    pieces = [c.data for c in chunks if isinstance(c, SyncChunk)]
    assert [c.index for c in chunks if isinstance(c, SyncChunk)] == list(range(first.count))
    message = signed_message(ROOM, "req-1", first.last_seq, first.digest)
    crypto.verify(ME.ed_pub, message, first.sig)
    assert unpack_snapshot(ROOM, pieces, first.digest) == store.state.snapshot()


async def test_no_answer_while_our_own_memory_has_a_hole(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A member that is catching up itself does not send a snapshot."""
    store, room = FakeStore(hole=True), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Answer(ROOM, "req-1", BEN.fingerprint))
        with trio.move_on_after(RETRY_AFTER - 1):
            got = await room.next()
            raise AssertionError(f"nothing should be posted, got {got}")


async def test_a_pending_claim_is_applied_and_reported_once_sequenced(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A watched op is advanced when the relay sequences it, and its outcome marked reported."""
    store, room = FakeStore(hole=False), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(WatchOwn(ROOM, "claim-1"))
        await trio.testing.wait_all_tasks_blocked()
        assert store.advanced == [] and store.reported == []
        store.outcomes["claim-1"] = Outcome("claim-1", 2, OutcomeCode.WON)
        room.sequence("claim-1")
        await trio.testing.wait_all_tasks_blocked()
    assert store.advanced == [ROOM] and store.reported == ["claim-1"]


async def test_probe_asks_nobody_and_is_watched(autojump_clock: trio.testing.MockClock) -> None:
    """The start probe is a request naming nobody, with our cursor, watched until sequenced."""
    store, room = FakeStore(hole=False), FakeRoom({})
    watched_send, watched = trio.open_memory_channel[MemorySyncInput](4)
    await probe(store, room.send_op, watched_send)
    _, posted_room, request = await room.next()
    assert posted_room == ROOM
    assert isinstance(request, SyncRequest) and request.ask is None and request.have == 1
    assert watched.receive_nowait() == WatchOwn(ROOM, "mine-1")
    assert watched.receive_nowait() == Probed((ROOM,))


async def test_a_room_joined_after_start_is_probed_at_the_next_look(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Rooms probed at start are not probed again; one joined later is, PROBE_EVERY after."""
    store, room = FakeStore(hole=False), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Probed((ROOM,)))
        store.joined.append("room-2")
        at, posted_room, request = await room.next()
        with trio.move_on_after(PROBE_EVERY * 3):
            got = await room.next()
            raise AssertionError(f"each room is probed once, got {got}")
    assert (at, posted_room) == (PROBE_EVERY, "room-2")
    assert isinstance(request, SyncRequest) and request.ask is None


async def test_a_room_left_and_joined_again_is_probed_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Sim seed 4483: leaving deletes a room's memory and a rejoiner starts at the head of the
    log, so the rejoin is probed like a first join, at the first look that finds it joined
    again after a look that found it left."""
    store, room = FakeStore(hole=False), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Probed((ROOM,)))
        store.joined.remove(ROOM)
        await trio.sleep(PROBE_EVERY * 1.5)  # (mock clock) one look finds the room left
        store.joined.append(ROOM)
        at, posted_room, request = await room.next()
    assert (at, posted_room) == (PROBE_EVERY * 2, ROOM)
    assert isinstance(request, SyncRequest) and request.ask is None


async def test_after_a_link_up_a_room_whose_log_now_starts_past_what_we_hold_is_probed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The relay dropped ops we never got while we were away (past its retention): with no
    later op to show the gap, the link-up's news must. A room without a gap, and one we are
    not in, are not probed."""
    store, room = FakeStore(hole=False), FakeRoom({})
    have = store.state.last_seq
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Probed((ROOM,)))
        await inbox.send(Resumed((("elsewhere", have + 9), (ROOM, have + 1))))
        with trio.move_on_after(1.0):
            got = await room.next()
            raise AssertionError(f"nothing is missing in {ROOM}, yet {got} was posted")
        await inbox.send(Resumed(((ROOM, have + 2),)))  # seq have + 1 is gone
        at, posted_room, request = await room.next()
    assert (at, posted_room) == (1.0, ROOM)
    assert isinstance(request, SyncRequest) and request.ask is None and request.have == have


async def test_the_store_counts_ops_still_in_the_inbound_log_as_held(tmp_path: Path) -> None:
    """An op committed by the link but not yet applied is no gap: no probe for it."""
    async with open_store(tmp_path / "state.db") as db:
        await db.write(lambda c: add_room(c, Room(ROOM, "r", "shared", "joined", 0, 0.0),
                                          b"k" * 32))
        adapter = StoreAdapter(db, MemoryFollower(ME.fingerprint))
        assert await adapter.received_through(ROOM) == 0
        await db.write(lambda c: commit_inbound(c, w.Op(ROOM, 7, "x", "op-7", b"\x00", 1.0), 1.0))
        assert await adapter.received_through(ROOM) == 7


async def chunks_within(room: FakeRoom, seconds: float) -> list[tuple[float, SyncChunk]]:
    """The snapshot pieces posted in the next ``seconds`` (requests are passed over)."""
    out: list[tuple[float, SyncChunk]] = []
    with trio.move_on_after(seconds):
        while True:
            at, _, op = await room.next()
            if isinstance(op, SyncChunk):
                out.append((at, op))
    return out


async def test_asked_everyone_in_vain_it_gives_up_its_hole_to_answer_one_that_missed_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Asked by Ben before a full round of its own asks has gone unanswered, it refuses; once
    Ben (online alone) has had our sequenced ask for RETRY_AFTER, Ben's ask (its hole ends
    later, at 9) makes it give its hole up and answer."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    room.relay_up = True
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Answer(ROOM, "early", BEN.fingerprint, held_from=9))
        assert await chunks_within(room, RETRY_AFTER + 1) == []
        await inbox.send(Answer(ROOM, "late", BEN.fingerprint, held_from=9))
        answered = await chunks_within(room, 1.0)
    assert store.conceded == [(RETRY_AFTER + 1, ROOM)]
    assert [c.request_id for _, c in answered] == ["late"] * len(answered) and answered
    assert answered[0][0] == RETRY_AFTER + 1


async def test_the_member_that_missed_less_or_an_unknown_amount_is_not_answered_by_conceding(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ben's hole ends before ours (3 < 5), or Ben does not say (an older peer): we keep ours
    and do not answer, however long we have asked; Ben is the one to give up."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    room.relay_up = True
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await trio.sleep(RETRY_AFTER * 3)
        await inbox.send(Answer(ROOM, "less", BEN.fingerprint, held_from=3))
        await inbox.send(Answer(ROOM, "unknown", BEN.fingerprint))
        assert await chunks_within(room, RETRY_AFTER) == []
    assert store.conceded == []


async def test_alone_in_the_room_with_a_hole_it_gives_it_up_after_one_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No other member, online or not, can ever fill the hole: given up after RETRY_AFTER."""
    store, room = FakeStore(hole=True), FakeRoom({})
    store.roster = [ME.fingerprint]
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        await start(supervisor, store, room)
        await trio.sleep(RETRY_AFTER * 3)
    assert store.conceded == [(RETRY_AFTER, ROOM)]


async def test_the_store_offers_only_joined_members_to_ask(tmp_path: Path) -> None:
    """A member still only invited gets none of the room's ops, so it is never one to ask."""
    async with open_store(tmp_path / "state.db") as db:
        def setup(conn: sqlite3.Connection) -> None:
            add_room(conn, Room(ROOM, "r", "shared", "joined", 0, 0.0), b"k" * 32)
            for keys, label, state in ((ME, "me", "member"), (BEN, "ben", "member"),
                                       (CY, "cy", "invited")):
                add_member(conn, RoomMember(ROOM, keys.fingerprint, label, keys.ed_pub,
                                            keys.x_pub, state))

        await db.write(setup)
        adapter = StoreAdapter(db, MemoryFollower(ME.fingerprint))
        assert sorted(await adapter.members(ROOM)) == sorted([ME.fingerprint, BEN.fingerprint])


async def test_asks_the_relay_has_not_sequenced_do_not_count_towards_giving_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cut off from the relay, our asks wait queued and nobody has heard them: however many
    rounds pass, Ben's ask does not make us give our hole up."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await trio.sleep(RETRY_AFTER * 4)
        await inbox.send(Answer(ROOM, "later", BEN.fingerprint, held_from=9))
        assert await chunks_within(room, RETRY_AFTER) == []
    assert store.conceded == []


@pytest.mark.parametrize("refusals_count", [False, True])
async def test_asks_the_relay_refused_do_not_count_towards_giving_up(
    refusals_count: bool, autojump_clock: trio.testing.MockClock
) -> None:
    """Every ask of ours is refused (we were removed, say): nobody heard them, so Ben's ask does
    not make us give our hole up. The planted bug hears a refusal as the ask being sequenced:
    we concede to Ben on the strength of asks nobody got."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    room.relay_refuses = True
    if refusals_count:
        heard = room.wait_sent

        async def counted(op_id: str) -> bool:
            await heard(op_id)
            return True

        room.wait_sent = counted  # type: ignore[method-assign]
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await trio.sleep(RETRY_AFTER * 4)
        await inbox.send(Answer(ROOM, "later", BEN.fingerprint, held_from=9))
        answered = await chunks_within(room, RETRY_AFTER)
    assert (store.conceded != [] and answered != []) is refusals_count


# --- repair --------------------------------------------------------------------------------------


def repairing_store() -> FakeStore:
    """No hole, but our memory gave one up and keeps a journal of 3 ops."""
    store = FakeStore(hole=False)
    store.gave_up, store.journaled = True, 3
    return store


async def test_a_conceded_memory_asks_each_online_member_once_to_repair_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """At each look it asks the online members it has not asked yet (Ben at once, Cy once
    online), each once, with ``repair`` set; nothing is asked once the memory is repaired."""
    store, room = repairing_store(), FakeRoom({BEN.fingerprint: True})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Probed((ROOM,)))
        ben_at, _, to_ben = await room.next()
        room.online[CY.fingerprint] = True
        cy_at, _, to_cy = await room.next()
        store.journaled = None  # repaired
        room.online[EVE.fingerprint] = True
        store.roster.append(EVE.fingerprint)
        with trio.move_on_after(PROBE_EVERY * 4):
            got = await room.next()
            raise AssertionError(f"each member is asked once, and none after a repair: {got}")
    assert (ben_at, cy_at) == (PROBE_EVERY, PROBE_EVERY * 2)
    assert isinstance(to_ben, SyncRequest) and isinstance(to_cy, SyncRequest)
    assert (to_ben.ask, to_ben.repair, to_ben.held_from) == (BEN.fingerprint, True, None)
    assert (to_cy.ask, to_cy.repair) == (CY.fingerprint, True)
    assert store.requests == []  # a repair takes any complete member's pieces: nothing to note


async def test_asked_to_repair_only_a_memory_that_gave_nothing_up_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A repair ask gets no answer from a conceded memory; a complete one answers with pieces
    that say they gave nothing up. An ordinary ask to a conceded memory is answered, and its
    pieces say so (the installer becomes conceded too)."""
    store, room = repairing_store(), FakeRoom({})
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Answer(ROOM, "fix-1", BEN.fingerprint, repair=True))
        assert await chunks_within(room, 1.0) == []
        await inbox.send(Answer(ROOM, "ask-1", BEN.fingerprint))
        ordinary = await chunks_within(room, 1.0)
        store.gave_up = False
        await inbox.send(Answer(ROOM, "fix-2", BEN.fingerprint, repair=True))
        repaired = await chunks_within(room, 1.0)
    assert ordinary and all(c.conceded and c.request_id == "ask-1" for _, c in ordinary)
    assert repaired and all(not c.conceded and c.request_id == "fix-2" for _, c in repaired)


async def test_a_journal_past_its_bound_is_dropped_and_nobody_is_asked(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Past JOURNAL_MAX ops the journal goes (the memory stays without what it gave up)."""
    store, room = repairing_store(), FakeRoom({BEN.fingerprint: True})
    store.journaled = JOURNAL_MAX + 1
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await inbox.send(Probed((ROOM,)))
        with trio.move_on_after(PROBE_EVERY * 3):
            got = await room.next()
            raise AssertionError(f"nothing should be asked, got {got}")
    assert store.dropped == [ROOM]


async def test_a_member_seen_sending_a_snapshot_is_asked_at_once_instead_of_conceding(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Exhausted (Ben had our sequenced ask for RETRY_AFTER), we see Cy send a snapshot: Cy is
    asked at once, and Ben's ask (Ben missed more) no longer makes us give our hole up."""
    store, room = FakeStore(hole=True), FakeRoom({BEN.fingerprint: True})
    room.relay_up = True
    async with running(Supervisor(heartbeat=5.0)) as supervisor:
        inbox = await start(supervisor, store, room)
        await room.next()
        await room.next()  # the second ask, at RETRY_AFTER: exhausted from here on
        await trio.sleep(1.0)
        room.online[CY.fingerprint] = True
        await inbox.send(SnapshotSeen(ROOM, CY.fingerprint))
        at, _, ask = await room.next()
        await inbox.send(Answer(ROOM, "later", BEN.fingerprint, held_from=9))
        assert await chunks_within(room, 1.0) == []
    assert isinstance(ask, SyncRequest) and (at, ask.ask) == (RETRY_AFTER + 1.0, CY.fingerprint)
    assert store.conceded == []
