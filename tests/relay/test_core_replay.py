"""A resume's replay goes a window at a time (relay.replay): every op owed reaches the device once
and in order per room, live ops of a room being replayed wait their turn in it, and a resume or
an acknowledgement brings at most a window of ops."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from tests.relay.harness import ALICE, BOB, World

WINDOW = 3


def _away(world: World, rooms: tuple[str, ...], owed: int) -> tuple[int, int]:
    """Alice and Bob share ``rooms``; Bob goes away and is owed ``owed`` ops in each."""
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    for room in rooms:
        world.room_of(a, ALICE, room, (b, BOB))
    world.take(a)
    world.close(b)
    for room in rooms:
        for i in range(owed):
            world.ok(a, w.Post(world.req(), room, f"{room}-{i}", b"x"))
    return a, world.login(BOB, resume=False)


def _ops(frames: list[w.RelayFrame]) -> list[tuple[str, int]]:
    return [(f.room, f.seq) for f in frames if isinstance(f, w.Op)]


def test_a_resume_sends_one_window_then_resumed_and_each_ack_sends_more() -> None:
    world = World(RelayConfig(replay_window=WINDOW))
    _, b = _away(world, ("ab",), 10)
    got = world.ok(b, w.Resume(world.req(), {"ab": 0}))
    assert _ops(got) == [("ab", 1), ("ab", 2), ("ab", 3)]
    assert isinstance(got[-1], w.Resumed) and got[-1].rooms == [w.ResumedRoom("ab", 1, 10)]
    assert _ops(world.send(b, w.Ack("ab", 2))) == [("ab", 4), ("ab", 5)]
    assert _ops(world.send(b, w.Ack("ab", 2))) == []  # nothing new acknowledged: nothing more
    assert _ops(world.send(b, w.Ack("ab", 5))) == [("ab", 6), ("ab", 7), ("ab", 8)]
    assert _ops(world.send(b, w.Ack("ab", 8))) == [("ab", 9), ("ab", 10)]
    assert _ops(world.send(b, w.Ack("ab", 10))) == []


def test_a_live_op_of_a_room_being_replayed_comes_in_its_turn_then_ops_are_live() -> None:
    world = World(RelayConfig(replay_window=WINDOW))
    a, b = _away(world, ("ab",), 5)
    assert _ops(world.ok(b, w.Resume(world.req(), {"ab": 0}))) == [("ab", 1), ("ab", 2), ("ab", 3)]
    world.ok(a, w.Post(world.req(), "ab", "while-replaying", b"x"))
    assert _ops(world.take(b)) == []  # not pushed ahead of 4 and 5
    assert _ops(world.send(b, w.Ack("ab", 3))) == [("ab", 4), ("ab", 5), ("ab", 6)]
    world.ok(a, w.Post(world.req(), "ab", "after", b"x"))
    assert _ops(world.take(b)) == [("ab", 7)]  # the replay is over: live again


def test_a_small_replay_is_whole_before_resumed_as_it_always_was() -> None:
    world = World()
    _, b = _away(world, ("ab", "cd"), 4)
    got = world.ok(b, w.Resume(world.req(), {"ab": 0, "cd": 0}))
    assert _ops(got) == [("ab", n) for n in range(1, 5)] + [("cd", n) for n in range(1, 5)]
    assert isinstance(got[-1], w.Resumed)


def test_a_device_whose_ops_all_expired_gets_live_ops_after_its_resume() -> None:
    """Retention dropped everything the device was owed: its replay has nothing to send, and
    must not hold the room's live pushes back for ever (the log ends short of the head)."""
    world = World(RelayConfig(replay_window=WINDOW, retention=3600.0))
    a, b = _away(world, ("ab",), 5)
    world.tick(7200.0)
    assert _ops(world.ok(b, w.Resume(world.req(), {"ab": 0}), now=7200.0)) == []
    world.ok(a, w.Post(world.req(), "ab", "after", b"x"), now=7201.0)
    assert _ops(world.take(b)) == [("ab", 6)]


def test_a_member_removed_mid_replay_is_sent_nothing_more_of_that_room() -> None:
    world = World(RelayConfig(replay_window=WINDOW))
    a, b = _away(world, ("ab",), 8)
    world.ok(b, w.Resume(world.req(), {"ab": 0}))
    world.ok(a, world.signed(a, w.Remove(world.req(), "ab", BOB.fp)))
    world.take(b)
    assert _ops(world.send(b, w.Ack("ab", 3))) == []


@settings(max_examples=60, deadline=None)
@given(
    owed=st.tuples(st.integers(0, 12), st.integers(0, 12)),
    window=st.integers(1, 6),
    steps=st.lists(st.tuples(st.sampled_from(["post", "ack"]), st.sampled_from(["ab", "cd"]),
                             st.integers(0, 4)), max_size=30),
)
def test_every_op_arrives_once_and_in_order_a_window_at_a_time(
    owed: tuple[int, int], window: int, steps: list[tuple[str, str, int]],
) -> None:
    """Random posts and acknowledgements (of part of what arrived) during the replay of two
    rooms; then Bob acknowledges everything until nothing more comes."""
    world = World(RelayConfig(replay_window=window))
    rooms = ("ab", "cd")
    a, b = _away(world, rooms, 0)
    for room, n in zip(rooms, owed, strict=True):
        for i in range(n):
            world.ok(a, w.Post(world.req(), room, f"{room}-{i}", b"x"))
    got = _ops(world.ok(b, w.Resume(world.req(), {"ab": 0, "cd": 0})))
    assert len(got) <= window
    for kind, room, n in steps:
        if kind == "post":
            world.ok(a, w.Post(world.req(), room, f"p{len(got)}", b"x"))
            got += _ops(world.take(b))
        else:
            seen = [s for r, s in got if r == room]
            more = _ops(world.send(b, w.Ack(room, seen[min(n, len(seen) - 1)] if seen else 0)))
            assert len(more) <= window
            got += more
    for _ in range(100):  # acknowledge what came until nothing more does
        more = []
        for room in rooms:
            seen = [s for r, s in got if r == room]
            if seen:
                more += _ops(world.send(b, w.Ack(room, seen[-1])))
        if not more:
            break
        got += more
    for room in rooms:
        head = world.core._rooms.rooms[room].head
        assert [s for r, s in got if r == room] == list(range(1, head + 1)), room
