"""The relay link's outbox machine: in order, one post per room in flight, paused, retried."""

from __future__ import annotations

import math

import pytest

from crosstalk.core.link.common import RESEAL_RETRY, OutboxItem, ReqNumbers, Resealed
from crosstalk.core.link.events import PostAccepted, PostRejected, ResealWanted
from crosstalk.core.link.outbox import Outbox
from crosstalk.errors import RemoteProtocolError
from crosstalk.wire import relay as w
from crosstalk.wire.room_ops import frame_body
from tests.core.link_helpers import item


def outbox(*items: int | tuple[int, str]) -> Outbox:
    rows = [item(i) if isinstance(i, int) else item(*i) for i in items]
    return Outbox(rows, reqs=ReqNumbers())


def ops(posts: list[w.Post]) -> list[str]:
    return [p.op_id for p in posts]


def test_the_first_item_of_each_room_goes_in_id_order() -> None:
    """Loaded in any order, items leave by id, one per room in flight."""
    o = outbox((3, "r2"), 2, 1)
    posts = o.pump(0.0)
    assert [(p.room, p.op_id) for p in posts] == [("r1", "op-1"), ("r2", "op-3")]
    assert o.pump(0.0) == []
    assert o.queued == 3


def test_posted_lets_the_room_s_next_item_go() -> None:
    """posted accepts the item (with its seq); the room's next item goes on the next pump."""
    o = outbox(1, 2)
    [first] = o.pump(0.0)
    answer = w.Posted(first.req, "r1", 10, 1234.5)
    assert o.answered(first.req, answer, 0.0) == PostAccepted(item(1), 10, 1234.5)
    assert ops(o.pump(0.0)) == ["op-2"]
    assert o.queued == 1


def test_a_transient_refusal_pauses_the_room_with_doubling_waits() -> None:
    """rate_limited pauses the room 1 s, then 2 s; the same item goes again after each pause."""
    o = outbox(1)
    now = 10.0
    for wait in (1.0, 2.0):
        [post] = o.pump(now)
        assert o.answered(post.req, w.Error(post.req, "rate_limited", "slow"), now) is None
        assert o.next_deadline() == now + wait
        o.expire(now + wait - 0.001)
        assert o.pump(now + wait - 0.001) == []
        now += wait
        o.expire(now)
    [again] = o.pump(now)
    assert again.op_id == "op-1"
    assert o.answered(again.req, w.Posted(again.req, "r1", 1), now) == PostAccepted(item(1), 1)
    assert o.next_deadline() == math.inf


def test_a_paused_room_does_not_hold_up_other_rooms() -> None:
    """backlog_full in r1 pauses r1 only; r2's items keep flowing."""
    o = outbox(1, (2, "r2"), (3, "r2"))
    first, second = o.pump(0.0)
    o.answered(first.req, w.Error(first.req, "backlog_full", "full"), 0.0)
    o.answered(second.req, w.Posted(second.req, "r2", 1), 0.0)
    assert ops(o.pump(0.0)) == ["op-3"]


def test_a_permanent_refusal_drops_the_item_and_the_next_goes() -> None:
    """too_large rejects the item for good with our error."""
    o = outbox(1, 2)
    [post] = o.pump(0.0)
    rejected = o.answered(post.req, w.Error(post.req, "too_large", "1 MiB"), 0.0)
    assert isinstance(rejected, PostRejected) and rejected.item == item(1)
    assert rejected.error.code == "too_large"
    assert ops(o.pump(0.0)) == ["op-2"]


def test_a_post_in_flight_when_the_link_drops_goes_again() -> None:
    """lost forgets what was in flight (the relay answers a repeated op_id with its seq)."""
    o = outbox(1)
    [post] = o.pump(0.0)
    o.lost()
    assert not o.owns(post.req)
    [again] = o.pump(1.0)
    assert again.op_id == "op-1" and again.req != post.req


def test_added_items_keep_id_order_and_duplicates_are_ignored() -> None:
    """add keeps the queue in id order, whatever order rows come in; an id is queued once."""
    o = outbox((3, "r2"))
    o.add(item(2))
    o.add(item(2))
    o.add(item(1))
    assert o.queued == 3
    assert ops(o.pump(0.0)) == ["op-1", "op-3"]


@pytest.mark.parametrize(
    "answer", [w.Ok(1), w.Posted(1, "other-room", 5)], ids=["ok", "posted-elsewhere"]
)
def test_an_odd_answer_to_a_post_is_a_protocol_error(answer: w.RelayFrame) -> None:
    """Neither posted (for this room) nor error: the relay broke the protocol."""
    o = outbox(1)
    [post] = o.pump(0.0)
    assert post.req == 1
    with pytest.raises(RemoteProtocolError):
        o.answered(post.req, answer, 0.0)


# --- never under an outdated key -------------------------------------------------------------


def sealed(i: int, epoch: int, room: str = "r1", *, pinned: bool = False) -> OutboxItem:
    """Outbox row ``i`` whose body says it is sealed under ``epoch``."""
    return OutboxItem(i, room, f"op-{i}", frame_body(epoch, b"sealed-%d" % i), pinned)


def test_an_item_under_an_older_epoch_than_the_room_showed_is_not_posted_but_resealed() -> None:
    """The relay's replay shows epoch 1; our item sealed under 0 is held and asked for anew,
    once per RESEAL_RETRY, while the room's other items wait behind it and other rooms flow."""
    o = Outbox([sealed(1, 0), sealed(2, 1), sealed(3, 0, "r2")], reqs=ReqNumbers())
    o.epoch_seen("r1", frame_body(1, b"theirs"))
    assert ops(o.pump(0.0)) == ["op-3"]  # r2 saw no newer epoch
    assert o.asks() == [ResealWanted(sealed(1, 0))]
    assert o.pump(0.5) == [] and o.asks() == []  # not asked again before the retry
    assert o.next_deadline() == RESEAL_RETRY
    o.resealed(sealed(1, 0), Resealed())  # no newer key here yet
    o.expire(RESEAL_RETRY)
    assert o.pump(RESEAL_RETRY) == [] and o.asks() == [ResealWanted(sealed(1, 0))]
    anew = sealed(1, 1)
    o.resealed(sealed(1, 0), Resealed(anew))
    [post] = o.pump(RESEAL_RETRY)
    assert (post.op_id, post.body) == ("op-1", anew.body)
    assert o.next_deadline() == math.inf


def test_a_pinned_item_passes_the_held_ones_and_the_rest_keep_their_order() -> None:
    """An op that carries keys (here behind a held one) goes under its own epoch at once: it may
    be what brings us the newer key (seed 2877). The unpinned item behind both keeps waiting."""
    o = Outbox(
        [sealed(1, 0), sealed(2, 0, pinned=True), sealed(3, 1)], reqs=ReqNumbers()
    )
    o.epoch_seen("r1", frame_body(1, b"theirs"))
    [post] = o.pump(0.0)
    assert (post.op_id, post.body) == ("op-2", sealed(2, 0).body)
    assert o.asks() == [ResealWanted(sealed(1, 0))]
    o.answered(post.req, w.Posted(post.req, "r1", 7), 0.0)
    assert o.pump(0.0) == []  # op-3 waits behind op-1, though it is sealed under epoch 1
    o.resealed(sealed(1, 0), Resealed(sealed(1, 1)))
    [first] = o.pump(0.0)
    assert first.op_id == "op-1"
    o.answered(first.req, w.Posted(first.req, "r1", 8), 0.0)
    assert ops(o.pump(0.0)) == ["op-3"]


def test_an_item_answered_as_is_goes_with_its_own_body() -> None:
    """An item the resealer cannot or must not seal anew (a room gone, a key op queued before the
    outbox knew) is posted as it is; the relay's answer settles it."""
    o = Outbox([sealed(1, 0), sealed(2, 0)], reqs=ReqNumbers())
    o.epoch_seen("r1", frame_body(3, b"theirs"))
    assert o.pump(0.0) == []
    assert o.asks() == [ResealWanted(sealed(1, 0)), ResealWanted(sealed(2, 0))]
    o.resealed(sealed(1, 0), Resealed(as_is=True))
    [post] = o.pump(0.0)
    assert post.body == sealed(1, 0).body
    o.answered(post.req, w.Posted(post.req, "r1", 7), 0.0)
    assert o.pump(0.0) == [] and o.asks() == []  # op-2 was asked already; its answer is due


def test_only_a_newer_epoch_holds_an_item_back() -> None:
    """Ops under our own epoch or older, and bodies that are not our framing, change nothing."""
    o = Outbox([sealed(1, 2), item(2, "r2")], reqs=ReqNumbers())
    o.epoch_seen("r1", frame_body(2, b"same"))
    o.epoch_seen("r1", frame_body(1, b"older"))
    o.epoch_seen("r2", frame_body(5, b"newer"))  # item 2's body is not framed: it goes
    o.epoch_seen("r1", b"not framed")
    assert ops(o.pump(0.0)) == ["op-1", "op-2"]
    assert o.asks() == []


def test_a_reseal_answer_for_an_item_that_left_changes_nothing() -> None:
    """An answer that comes after the item was taken (its earlier post was answered) is moot."""
    o = Outbox([sealed(1, 0)], reqs=ReqNumbers())
    [post] = o.pump(0.0)
    o.epoch_seen("r1", frame_body(1, b"theirs"))
    o.answered(post.req, w.Posted(post.req, "r1", 4), 0.0)
    o.resealed(sealed(1, 0), Resealed(sealed(1, 1)))
    assert o.queued == 0 and o.pump(0.0) == []


def test_a_dropped_link_asks_again_on_the_next_one_and_leaves_no_past_deadline() -> None:
    """While disconnected nothing is pumped, so a past ask time must not wake the link in a loop:
    ``lost`` forgets the ask times and the next READY's pump asks again."""
    o = Outbox([sealed(1, 0)], reqs=ReqNumbers())
    o.epoch_seen("r1", frame_body(1, b"theirs"))
    o.pump(0.0)
    assert len(o.asks()) == 1
    o.lost()
    assert o.next_deadline() == math.inf
    o.pump(0.1)
    assert o.asks() == [ResealWanted(sealed(1, 0))]


def test_our_own_op_coming_back_takes_its_item_out_at_that_seq() -> None:
    """A replay that brings back an op we posted answers its item: it leaves at the op's seq,
    its post in flight is forgotten (a late posted matches nothing) and the room's next goes."""
    o = outbox(1, 2)
    [post] = o.pump(0.0)
    back = w.Op("r1", 7, "me", "op-1", b"body-1", 1.0)
    assert o.came_back(back) == PostAccepted(item(1), 7, 1.0)  # at the relay's time for it
    assert not o.owns(post.req) and o.queued == 1
    assert ops(o.pump(0.0)) == ["op-2"]


def test_an_op_that_matches_no_item_takes_nothing() -> None:
    """Another op id, or the same op id in another room, leaves the outbox as it was."""
    o = outbox(1)
    assert o.came_back(w.Op("r1", 7, "me", "op-9", b"", 1.0)) is None
    assert o.came_back(w.Op("r2", 7, "me", "op-1", b"", 1.0)) is None
    assert o.queued == 1 and o.rooms() == {"r1"}
