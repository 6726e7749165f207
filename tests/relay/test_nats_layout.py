"""The NATS layout's shortcuts agree with the long way (sans-IO): a node takes a write's unit
without planning its message, and its tails from the writes a message carries without decoding
what it just published."""

from __future__ import annotations

import pytest

from crosstalk.wire.chain import Statement
from crosstalk.wire.relay import Member
from relay.nats_layout import MAX_GROUP_OPS, Layout
from relay.storage import (
    CursorPut,
    DevicePut,
    GrantDeleted,
    GrantPut,
    MemberDeleted,
    MemberPut,
    OpAppended,
    OpsPruned,
    Peer,
    RoomDeleted,
    RoomPut,
    SlotFilled,
    SlotOpened,
    SlotPartPut,
    SlotRemoved,
    StatementAppended,
    StoredOp,
    Write,
)

ALICE = Member("alice-fp", b"a" * 32, b"A" * 32, "joined", "alice-fp", b"s" * 64)
BOB = Member("bob-fp", b"b" * 32, b"B" * 32, "invited", "alice-fp", b"t" * 64)
PEER = Peer("bob-fp", b"b" * 32, b"B" * 32)

# One request's writes of every kind, with membership of two rooms back to back.
WRITES: list[Write] = [
    RoomPut("r1"), MemberPut("r1", ALICE), MemberPut("r1", BOB),
    RoomPut("r2"), MemberPut("r2", ALICE),
    OpAppended("r1", StoredOp(1, "alice-fp", "op-1", b"\x00body", 1700000000.25)),
    CursorPut("alice-fp", "laptop", "r1", 1), DevicePut("alice-fp", "laptop"),
    OpsPruned("r1", 1), MemberDeleted("r1", "bob-fp"),
    SlotOpened("4509", PEER, 900.0), SlotFilled("4509", PEER),
    SlotPartPut("4509", "owner", 0, b"part"), SlotRemoved("4509"),
    GrantPut("alice-fp", "bob-fp", 900.0), GrantDeleted("alice-fp", "bob-fp"),
    RoomDeleted("r2"),
]


def test_units_of_writes_are_those_of_their_messages() -> None:
    lay = Layout("N")
    planned: list[str] = []
    for out in lay.plan(WRITES):
        if out.unit is not None and out.unit not in planned:
            planned.append(out.unit)
    assert lay.units_of(WRITES) == planned
    assert planned == ["r.r1", "r.r2", "slot.4509", "grant.alice-fp.bob-fp"]


def test_each_message_carries_what_decoding_it_gives_back() -> None:
    lay = Layout("N")
    messages = lay.plan(WRITES, by="alice-fp")
    assert [w for out in messages for w in out.writes] == WRITES
    for out in messages:
        stored = lay.decode(out.subject, out.headers, out.payload)
        assert stored is not None, out.subject
        assert stored.unit == out.unit
        assert stored.writes == list(out.writes)


def test_a_post_alone_is_one_message_carrying_its_op() -> None:
    """A post's write, planned alone as a node plans it, is one message that decodes back to
    it (the path most messages take), in the per-op form a grouped message extends."""
    lay = Layout("N")
    post = OpAppended("r1", StoredOp(7, "alice-fp", "op-7", b"x", 12.0))
    [out] = lay.plan([post])
    assert out.writes == (post,) and out.unit == "r.r1" and "Ct-Len" not in out.headers
    assert out.headers["Nats-Msg-Id"].startswith("r1:alice-fp:")
    stored = lay.decode(out.subject, out.headers, out.payload)
    assert stored is not None and stored.writes == [post]


def test_consecutive_posts_of_a_sender_are_one_message() -> None:
    """Posts gathered in one pass are one message (one compare-and-set, one message for every
    other node to take in) that decodes back to every op, bodies of any length included; a
    post of another sender or room starts a new message."""
    lay = Layout("N")
    bodies = [b"", b"a,b", bytes(range(256)), b"x"]
    posts: list[Write] = [OpAppended("r1", StoredOp(7 + i, "alice-fp", f"op-{i}", body, 5.0 + i))
                          for i, body in enumerate(bodies)]
    other = OpAppended("r1", StoredOp(11, "bob-fp", "op-b", b"y", 9.5))
    elsewhere = OpAppended("r2", StoredOp(1, "bob-fp", "op-c", b"z", 9.5))
    messages = lay.plan([*posts, other, elsewhere])
    assert [out.writes for out in messages] == [tuple(posts), (other,), (elsewhere,)]
    grouped = messages[0]
    assert grouped.unit == "r.r1" and grouped.headers["Nats-Msg-Id"] == (
        "r1:alice-fp:" + grouped.headers["Ct-Op"].split(",")[0])  # the first op's
    for out in messages:
        stored = lay.decode(out.subject, out.headers, out.payload)
        assert stored is not None and stored.unit == out.unit
        assert stored.writes == list(out.writes)


def test_an_accept_is_one_membership_message_and_its_cursor_follows() -> None:
    """The member's row and the statement that makes it are stored (and fed to other nodes)
    together: the new device's cursor between them goes out after them (simulation seed 21)."""
    lay = Layout("N")
    joined = Member("bob-fp", b"b" * 32, b"B" * 32, "joined", "alice-fp", b"t" * 64)
    accept = StatementAppended("r1", 2, Statement("r1", "accept", "bob-fp", "bob-fp", after=1))
    cursor = CursorPut("bob-fp", "laptop", "r1", 0)
    messages = lay.plan([MemberPut("r1", joined), cursor, accept, DevicePut("bob-fp", "pc")])
    assert [out.writes for out in messages] == [
        (MemberPut("r1", joined), accept), (cursor,), (DevicePut("bob-fp", "pc"),)]
    assert [out.unit for out in messages] == ["r.r1", None, None]


def test_a_group_is_cut_at_its_limit() -> None:
    lay = Layout("N")
    posts: list[Write] = [OpAppended("r1", StoredOp(1 + i, "a", f"op-{i}", b"x", 1.0))
                          for i in range(MAX_GROUP_OPS + 1)]
    assert [len(out.writes) for out in lay.plan(posts)] == [MAX_GROUP_OPS, 1]


@pytest.mark.parametrize("change", [
    {"Ct-Len": "2,1"},  # bodies shorter than the lengths say
    {"Ct-Len": "1,0,0"},  # one length more than ops
    {"Ct-Len": "0,0"},  # bodies longer than the lengths say
    {"Ct-Len": "-1,3"},
])
def test_a_malformed_group_is_refused(change: dict[str, str]) -> None:
    lay = Layout("N")
    posts: list[Write] = [OpAppended("r1", StoredOp(1 + i, "a", f"op-{i}", b"x", 1.0))
                          for i in range(2)]
    [out] = lay.plan(posts)
    with pytest.raises(ValueError):
        lay.decode(out.subject, {**out.headers, **change}, out.payload)
