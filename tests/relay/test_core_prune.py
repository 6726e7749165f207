"""Pruning acknowledged ops in the relay core: the count of devices holding the first held op
(``RoomState.holding``) prunes exactly what computing the floor at every acknowledgement did."""

from __future__ import annotations

import random

import pytest

from crosstalk.wire.relay import Member
from relay.rooms import RoomBook, RoomState
from relay.storage import Write

ROOM = "r"


class EveryAck(RoomBook):
    """The reference: the floor computed at every acknowledgement, as before the count."""

    def _still_held(self, state: RoomState, old: int, new: int) -> bool:
        return False


class NeverCountsDown(RoomBook):
    """A planted bug: an acknowledgement never counts its device off the first held op."""

    def _still_held(self, state: RoomState, old: int, new: int) -> bool:
        return self.prune_limit is None and state.holding is not None and state.holding > 0


class Counting(RoomBook):
    """Counts how often the floor is computed."""

    computed = 0

    def _prune_acknowledged(self, state: RoomState) -> list[Write]:
        self.computed += 1
        return super()._prune_acknowledged(state)


def _member(fp: str, state: str) -> Member:
    return Member(fp, b"e" * 32, b"x" * 32, state, "m0", b"s")  # type: ignore[arg-type]


class Script:
    """One random history of a room (members joining and leaving, devices appearing, posts,
    acknowledgements, retention) applied step by step to a book; records every write."""

    def __init__(self, book: RoomBook, seed: int) -> None:
        self.book, self.rng = book, random.Random(seed)
        self.writes: list[Write] = []
        self.next_fp = 1
        self.writes += book.device_seen("m0", "d0")
        state, writes = book.create(ROOM, _member("m0", "joined"))
        self.writes += writes
        self.state = state

    def step(self, now: float) -> None:
        rng, book, state = self.rng, self.book, self.state
        joined = state.joined()
        roll = rng.random()
        if roll < 0.1:  # someone new joins, with one or two devices
            fp = f"m{self.next_fp}"
            self.next_fp += 1
            for d in range(rng.choice((1, 2))):
                self.writes += book.device_seen(fp, f"d{d}")
            self.writes += book.add(state, _member(fp, "invited"))
            self.writes += book.accept(ROOM, fp)[1]
        elif roll < 0.15 and len(joined) > 2:
            self.writes += book.drop_member(state, rng.choice(joined[1:]))
        elif roll < 0.18:  # a member's new device
            self.writes += book.device_seen(rng.choice(joined), f"d{rng.randrange(2, 4)}")
        elif roll < 0.4:
            book.append(state, rng.choice(joined), f"op{now}", b"x", now)
        elif roll < 0.42:
            self.writes += book.expire(now - 50)
        else:  # a device acknowledges up to somewhere between its cursor and the head
            fp = rng.choice(joined)
            device = rng.choice(sorted(book.devices.get(fp, {"d0"})))
            self.writes += book.acknowledge(fp, device, ROOM, rng.randint(0, state.head))


def _diverges(book: RoomBook, seed: int, steps: int = 400) -> bool:
    """Whether ``book`` prunes differently from :class:`EveryAck` on the seed's history."""
    mine, reference = Script(book, seed), Script(EveryAck(), seed)
    for now in range(steps):
        mine.step(float(now))
        reference.step(float(now))
        if mine.writes != reference.writes:
            return True
    return [op.seq for op in mine.state.log] != [op.seq for op in reference.state.log]


@pytest.mark.parametrize("seed", range(25))
def test_counting_holders_prunes_exactly_what_the_floor_at_every_ack_did(seed: int) -> None:
    """Same writes, same held ops, step by step, on a random room history."""
    assert not _diverges(RoomBook(), seed)


def test_the_comparison_catches_a_count_that_never_goes_down() -> None:
    """Planted bug: without counting down, ops stay held that the reference pruned."""
    assert any(_diverges(NeverCountsDown(), seed) for seed in range(5))


def _floors_for_ten_ops(book: Counting) -> int:
    """How often ``book`` computes the floor while 50 members acknowledge each of ten ops."""
    fps = [f"m{i}" for i in range(50)]
    for fp in fps:
        book.device_seen(fp, "d0")
    state, _ = book.create(ROOM, _member(fps[0], "joined"))
    for fp in fps[1:]:
        book.add(state, _member(fp, "invited"))
        book.accept(ROOM, fp)
    book.computed = 0
    for n in range(1, 11):
        book.append(state, fps[0], f"op{n}", b"x", 0.0)
        for fp in fps:
            book.acknowledge(fp, "d0", ROOM, n)
        assert not state.log  # everyone has it: pruned
    return book.computed


class CountingEveryAck(Counting, EveryAck):
    """The reference, counted."""


def test_a_room_of_many_computes_the_floor_once_per_op() -> None:
    """Every member acknowledging every op: the floor is computed by the last ack of each op
    (and once to count after the joins), not by every ack as the reference does (that was
    O(n^2) per op in a room of n)."""
    assert _floors_for_ten_ops(Counting()) <= 11
    assert _floors_for_ten_ops(CountingEveryAck()) == 500
