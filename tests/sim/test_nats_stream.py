"""The simulation's in-memory JetStream behaves as the real server does where the nodes rely on
it (the same properties tests/relay/test_nats_cas.py and test_nats_storage.py check there)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from relay import nats_wire as wire
from relay.nats_layout import Layout
from relay.nats_store import LOST_CAS, JetStreamError, NatsStorage, WriteConflict
from relay.storage import MemberPut, MemoryStorage, OpAppended, OpsPruned, RoomPut, StoredOp
from tests.relay.test_nats_storage import normal
from tests.relay.test_storage import ALICE, BOB, SCRIPT
from tests.sim.nats_stream import SimBackend, SimStream, subject_matches


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def stream(clock: Clock | None = None) -> SimStream:
    return SimStream(Layout("t"), clock or Clock())


def cas(expected: int, wildcard: str | None = None) -> dict[str, str]:
    headers = {"Nats-Expected-Last-Subject-Sequence": str(expected)}
    if wildcard:
        headers["Nats-Expected-Last-Subject-Sequence-Subject"] = wildcard
    return headers


def test_subjects_match_as_nats_wildcards_do() -> None:
    """``*`` is one token, ``>`` one or more at the end, anything else is exact."""
    assert subject_matches("t.s.r.a.*", "t.s.r.a.o")
    assert not subject_matches("t.s.r.a.*", "t.s.r.a.o.x")
    assert subject_matches("t.s.>", "t.s.r.a.o")
    assert not subject_matches("t.s.>", "t.s")
    assert not subject_matches("t.s.r.a.o", "t.s.r.b.o")


def test_of_two_publishes_expecting_the_same_last_sequence_one_wins() -> None:
    """The compare-and-set: the second publish naming a stale sequence is refused (10071),
    checked against the room's wildcard so membership and ops share one order."""
    s = stream()
    room = "t.s.r.a.*"
    seq, dup = s.publish("t.s.r.a.m", b"m", cas(0, room))
    assert (seq, dup) == (1, False)
    with pytest.raises(JetStreamError) as lost:
        s.publish("t.s.r.a.o", b"o", cas(0, room))
    assert lost.value.err_code in LOST_CAS
    assert s.publish("t.s.r.a.o", b"o", cas(1, room)) == (2, False)
    assert s.publish("t.s.r.b.o", b"other room", cas(0, "t.s.r.b.*")) == (3, False)


def test_a_repeated_message_id_is_a_duplicate_within_the_window_only() -> None:
    """Within the duplicate window a retried publish stores nothing and answers the first
    sequence, before any expected-sequence check; after the window it is stored again."""
    clock = Clock()
    s = stream(clock)
    first = s.publish("t.s.r.a.o", b"x", {"Nats-Msg-Id": "a:1", **cas(0)})
    assert s.publish("t.s.r.a.o", b"x", {"Nats-Msg-Id": "a:1", **cas(0)}) == (first[0], True)
    assert len(s) == 1
    clock.now += 121.0
    assert s.publish("t.s.r.a.o", b"x", {"Nats-Msg-Id": "a:1"}) == (2, False)


def test_a_rollup_leaves_only_itself_and_a_ttl_message_expires() -> None:
    """``Nats-Rollup: sub`` replaces the subject's messages; ``Nats-TTL`` removes a message once
    its seconds passed, and the subject's last sequence goes with it."""
    clock = Clock()
    s = stream(clock)
    s.publish("t.s.d.fp.dev", b"", {})
    s.publish("t.s.d.fp.dev", b"", {"Nats-Rollup": "sub"})
    assert [m.seq for m in s.scan("t.s.d.>")] == [2]
    s.publish("t.s.slot.7", b"open", {"Nats-TTL": "60"})
    clock.now += 59.0
    assert s.get_last("t.s.slot.7") is not None
    clock.now += 1.0
    assert s.get_last("t.s.slot.7") is None and s.last_on("t.s.slot.7") == 0


def test_a_purge_below_a_sequence_keeps_the_newest_and_the_last_sequence() -> None:
    """Purging a filter below a sequence keeps what is at or above it; the stream's sequence
    never goes back."""
    s = stream()
    for i in range(4):
        s.publish("t.s.r.a.o", b"%d" % i, {})
    s.publish("t.s.c.a.fp.dev", b"1", {})
    s.purge("t.s.r.a.o", 4)
    assert [m.seq for m in s.scan("t.s.>")] == [4, 5]
    s.purge("t.s.c.a.>")
    assert [m.seq for m in s.scan("t.s.>")] == [4]
    assert s.publish("t.s.r.a.o", b"", {}) == (6, False)


async def test_stored_messages_are_republished_in_order_behind_a_connection_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Each stored message reaches matching subscriptions on ``N.p.>`` with its sequence and
    headers, in stream order; a connection's delay holds its deliveries that long."""
    s = stream(Clock())
    backend = SimBackend(s, "n")
    conn, _ = backend.connection(lambda: None)
    got: list[tuple[float, str, bytes | None]] = []
    conn.subscribe("t.p.r.*.o", lambda m: got.append(
        (trio.current_time(), m.subject, wire.header_value(m.headers or b"", b"Nats-Sequence"))))
    conn.delay = 2.0
    async with trio.open_nursery() as nursery:
        await nursery.start(conn.run)
        s.publish("t.s.r.a.o", b"", cas(0))
        s.publish("t.s.r.a.m", b"", {})  # not subscribed
        s.publish("t.s.r.b.o", b"", {})
        await trio.sleep(5.0)
        nursery.cancel_scope.cancel()
    assert got == [(2.0, "t.p.r.a.o", b"1"), (2.0, "t.p.r.b.o", b"3")]


def test_the_storage_contract_holds_on_the_stand_in() -> None:
    """NatsStorage over the stand-in gives the memory model's snapshot, as over a real server
    (tests/relay/test_nats_storage.py), and a restart loads it again."""
    s = stream()
    memory, store = MemoryStorage(), NatsStorage("", namespace="t", backend=SimBackend(s, "a"))
    for batch in SCRIPT:
        memory.commit(batch)
        store.commit(batch)
    assert normal(store.load()) == normal(memory.load())
    again = NatsStorage("", namespace="t", backend=SimBackend(s, "b"))
    assert normal(again.load()) == normal(memory.load())


def test_pruning_on_the_stand_in_keeps_the_head() -> None:
    """A fully pruned log still reports its head, and the next append follows it."""
    s = stream()
    store = NatsStorage("", namespace="t", backend=SimBackend(s, "a"))
    ops = [OpAppended("r", StoredOp(i, ALICE.fingerprint, f"o{i}", b"x", 1.0)) for i in (1, 2)]
    store.commit([RoomPut("r"), MemberPut("r", ALICE), *ops, OpsPruned("r", 2)])
    store.commit([OpAppended("r", StoredOp(3, ALICE.fingerprint, "o3", b"y", 2.0))])
    [room] = NatsStorage("", namespace="t", backend=SimBackend(s, "b")).load().rooms
    assert (room.head, [op.op_id for op in room.ops]) == (3, ["o3"])


async def test_a_node_that_did_not_see_another_nodes_write_loses_its_compare_and_set() -> None:
    """Two nodes load the same room; the second to write it (on a stale tail) gets
    WriteConflict naming the room, and wins once it reloaded."""
    s = stream()
    one = NatsStorage("", namespace="t", backend=SimBackend(s, "a"))
    one.commit([RoomPut("r"), MemberPut("r", ALICE)])
    two = NatsStorage("", namespace="t", backend=SimBackend(s, "b"))
    two.load()
    await one.acommit([MemberPut("r", BOB)])
    with pytest.raises(WriteConflict) as lost:
        await two.acommit([OpAppended("r", StoredOp(1, ALICE.fingerprint, "o1", b"x", 1.0))])
    assert lost.value.unit == "r.r"
    _, two.tails = await two.areload("r.r")
    await two.acommit([OpAppended("r", StoredOp(1, ALICE.fingerprint, "o1", b"x", 1.0))])
