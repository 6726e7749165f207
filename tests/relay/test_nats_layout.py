"""The NATS layout's shortcuts agree with the long way (sans-IO): a node takes a write's unit
without planning its message, and its tails from the writes a message carries without decoding
what it just published."""

from __future__ import annotations

from crosstalk.wire.relay import Member
from relay.nats_layout import Layout
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
    """A post's write, planned alone as a node plans it, is one message per op that decodes
    back to it (the path most messages take)."""
    lay = Layout("N")
    posts: list[Write] = [OpAppended("r1", StoredOp(s, "alice-fp", f"op-{s}", b"x", 5.0 + s))
                          for s in (7, 8)]
    messages = lay.plan(posts)
    assert [out.writes for out in messages] == [(posts[0],), (posts[1],)]
    for out in messages:
        assert out.unit == "r.r1" and out.headers["Nats-Msg-Id"].startswith("r1:alice-fp:")
        stored = lay.decode(out.subject, out.headers, out.payload)
        assert stored is not None and stored.writes == list(out.writes)
