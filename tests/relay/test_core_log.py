"""The room log in the relay core: order, delivery, cursors, retention, limits, restart."""

from __future__ import annotations

import itertools

import pytest

from crosstalk.wire import relay as w
from relay.effects import Send
from relay.limits import RelayConfig
from relay.replica import apply_stored
from relay.rooms import RoomBook
from relay.slots import SlotTable
from relay.storage import DepartedOps, MemberDeleted, MemberPut, MemoryStorage, OpAppended
from tests.relay.harness import ALICE, BOB, CAROL, MALLORY, World, frames_of


def _two(world: World, **login: object) -> tuple[int, int]:
    a, b = world.login(ALICE), world.login(BOB)
    world.pair(a, b)
    world.room_of(a, ALICE, "ab", (b, BOB))
    world.take(a)
    world.take(b)
    return a, b


def _seqs(frames: list[w.RelayFrame]) -> list[int]:
    return [f.seq for f in frames if isinstance(f, w.Op)]


def test_posts_get_consecutive_seqs_and_are_pushed_in_order() -> None:
    """One total order per room, pushed to the other member as it happens."""
    world = World()
    a, b = _two(world)
    for i in range(5):
        [posted] = world.ok(a, w.Post(world.req(), "ab", f"op{i}", b"x"))
        assert isinstance(posted, w.Posted) and posted.seq == i + 1
    ops = world.take(b)
    assert _seqs(ops) == [1, 2, 3, 4, 5]
    first = ops[0]
    assert isinstance(first, w.Op) and (first.sender, first.op_id, first.body) == (
        ALICE.fp, "op0", b"x")


def test_posted_comes_after_the_write_in_the_same_batch() -> None:
    """The ack and the pushes follow the op's storage write (the shell commits writes first)."""
    world = World()
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o", b"x"))
    kinds = [type(e.frame) if isinstance(e, Send) else type(e) for e in world.effects]
    assert kinds.index(OpAppended) < kinds.index(w.Posted) < kinds.index(w.Op)
    assert world.storage.load().rooms[0].ops[0].op_id == "o"


def test_ops_reach_every_other_device_of_every_joined_member_but_not_the_sender_conn() -> None:
    """The sender's second machine gets its own ops; the sending connection only gets posted."""
    world = World()
    a, b = _two(world)
    a2 = world.login(ALICE, device="dev-2")
    world.ok(a, w.Post(world.req(), "ab", "o", b"x"))
    assert _seqs(world.take(a2)) == [1]
    assert _seqs(world.take(b)) == [1]
    assert _seqs(world.take(a)) == []


def test_retried_post_returns_original_seq_and_is_stored_once() -> None:
    """Post is idempotent on (room, op_id)."""
    world = World()
    a, b = _two(world)
    [p1] = world.ok(a, w.Post(world.req(), "ab", "same", b"x"))
    [p2] = world.ok(a, w.Post(world.req(), "ab", "same", b"x"))
    assert isinstance(p1, w.Posted) and isinstance(p2, w.Posted) and p1.seq == p2.seq == 1
    assert _seqs(world.take(b)) == [1]
    assert world.core.statistics().held_ops == 1


def test_a_retried_post_is_answered_posted_after_its_sender_was_removed() -> None:
    """Alice's op is sequenced, her answer lost, and Bob removes her before she retries: while
    the relay holds the op, her retry hears its seq, not not_a_member (she would report as
    refused an op Bob reads). Nobody else gets an answer for her op id."""
    world = World()
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "mine", b"x"))
    world.close(a)
    world.ok(b, w.Remove(world.req(), "ab", ALICE.fp))
    a2 = world.login(ALICE, resume=False)
    [posted] = world.ok(a2, w.Post(world.req(), "ab", "mine", b"x"))
    assert isinstance(posted, w.Posted) and posted.seq == 1
    assert world.error(a2, w.Post(world.req(), "ab", "new", b"x")) == "not_a_member"
    c = world.login(CAROL)
    assert world.error(c, w.Post(world.req(), "ab", "mine", b"x")) == "not_a_member"
    assert world.core.statistics().held_ops == 1


def _removed_after_everyone_else_read(world: World) -> int:
    """Alice posts "mine" (seq 1) and her connection drops before she reads the answer; Bob
    has read it, so removing her prunes it. Returns her new connection."""
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "mine", b"x"))
    world.close(a)
    world.send(b, w.Ack("ab", 1))
    world.ok(b, w.Remove(world.req(), "ab", ALICE.fp))
    assert world.core.statistics().held_ops == 0  # pruned: nobody left is owed it
    return world.login(ALICE, resume=False)


@pytest.mark.parametrize("plant", [False, True])
def test_a_retried_post_pruned_by_its_sender_s_removal_is_still_answered_posted(
    plant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sim seed 5249: the removal pruned Alice's op (Bob had it), so only what the room keeps
    with her departure can answer her retry with its seq; also after a restart from storage.
    Her other op ids stay refused. The planted bug keeps nothing with the departure: she is
    refused an op Bob read."""
    if plant:
        monkeypatch.setattr(RoomBook, "_unacknowledged", lambda self, state, fp: ())
    world = World()
    a2 = _removed_after_everyone_else_read(world)
    retry = w.Post(world.req(), "ab", "mine", b"x")
    if plant:
        assert world.error(a2, retry) == "not_a_member"
        return
    [posted] = world.ok(a2, retry)
    assert isinstance(posted, w.Posted) and posted.seq == 1
    assert world.error(a2, w.Post(world.req(), "ab", "other", b"x")) == "not_a_member"
    restarted = World(storage=world.storage)
    a3 = restarted.login(ALICE, resume=False)
    [again] = restarted.ok(a3, w.Post(restarted.req(), "ab", "mine", b"x"))
    assert isinstance(again, w.Posted) and again.seq == 1


def test_only_the_ops_a_removed_member_had_not_acknowledged_are_kept_with_it() -> None:
    """Alice's first op came back to her (her cursor passed it), her second did not: only the
    second is kept with her departure, and her own retry is all it answers."""
    world = World()
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "seen", b"x"))
    world.send(a, w.Ack("ab", 1))
    world.ok(a, w.Post(world.req(), "ab", "unseen", b"x"))
    world.send(b, w.Ack("ab", 2))
    world.ok(b, w.Remove(world.req(), "ab", ALICE.fp))
    [room] = world.storage.load().rooms
    assert room.departed_ops == {ALICE.fp: {"unseen": 2}}
    c = world.login(CAROL)
    assert world.error(c, w.Post(world.req(), "ab", "unseen", b"x")) == "not_a_member"


def test_no_live_ops_before_resume_then_replay_after_cursor_in_order() -> None:
    """A reconnecting device gets exactly what follows its cursor, then live ops."""
    world = World()
    a, b = _two(world)
    world.close(b)
    for i in range(4):
        world.ok(a, w.Post(world.req(), "ab", f"o{i}", b"x"))
    b2 = world.login(BOB, resume=False)
    world.ok(a, w.Post(world.req(), "ab", "o4", b"x"))
    assert _seqs(world.take(b2)) == []
    got = world.ok(b2, w.Resume(world.req(), {"ab": 1}))
    assert _seqs(got) == [2, 3, 4, 5]
    resumed = got[-1]
    assert isinstance(resumed, w.Resumed)
    assert resumed.rooms == [w.ResumedRoom("ab", 1, 5)] and resumed.missing == []
    world.ok(a, w.Post(world.req(), "ab", "o5", b"x"))
    assert _seqs(world.take(b2)) == [6]


def test_resume_replays_a_joined_room_the_device_did_not_name() -> None:
    """A device that never heard the answer to its accept does not name the room when it
    resumes; the relay replays it from that device's cursor anyway, so a later live op cannot
    carry the device past ops it never got."""
    world = World()
    a, b = _two(world)
    world.ok(b, w.Ack("ab", 0))
    world.close(b)
    for i in range(3):
        world.ok(a, w.Post(world.req(), "ab", f"o{i}", b"x"))
    b2 = world.login(BOB, resume=False)
    req = world.req()
    got = world.ok(b2, w.Resume(req, {}))
    assert _seqs(got) == [1, 2, 3]
    assert got[-1] == w.Resumed(req, [w.ResumedRoom("ab", 1, 3)], [])


def test_resume_never_replays_what_was_posted_while_the_device_was_out() -> None:
    """Bob leaves, ops are posted, Bob is added again and accepts; a device that still names
    its old cursor gets only what came after it rejoined."""
    world = World()
    a, b = _two(world)
    world.room_of(a, ALICE, "cd", (b, BOB))  # so that Alice may add Bob again
    world.ok(b, w.Leave(world.req(), "ab"))
    world.ok(a, w.Post(world.req(), "ab", "while-out", b"secret"))
    world.ok(a, w.Add(world.req(), "ab", BOB.ed_pub, BOB.x_pub, ALICE.vouch("ab", BOB)))
    world.ok(b, w.Accept(world.req(), "ab"))
    world.ok(a, w.Post(world.req(), "ab", "after", b"x"))
    world.close(b)
    b2 = world.login(BOB, resume=False)
    got = world.ok(b2, w.Resume(world.req(), {"ab": 0}))
    assert _seqs(got) == [2]


def test_resume_of_rooms_you_are_not_in_reveals_nothing() -> None:
    """A stranger resuming someone's room gets no ops, only 'missing'."""
    world = World()
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o", b"secret"))
    m = world.login(MALLORY, resume=False)
    req = world.req()
    got = world.ok(m, w.Resume(req, {"ab": 0, "nope": 0}))
    assert got == [w.Resumed(req, [], ["ab", "nope"])]


def test_op_held_until_every_device_of_every_member_acknowledged() -> None:
    """Pruning waits for the slowest known device, including the sender's own."""
    world = World()
    a, b = _two(world)
    b2 = world.login(BOB, device="dev-2")
    world.ok(a, w.Post(world.req(), "ab", "o", b"x"))
    world.send(b, w.Ack("ab", 1))
    world.send(a, w.Ack("ab", 1))
    assert world.core.statistics().held_ops == 1
    world.send(b2, w.Ack("ab", 1))
    assert world.core.statistics().held_ops == 0
    assert world.storage.load().rooms[0].ops == []
    assert world.storage.load().rooms[0].head == 1


def test_ack_beyond_head_or_from_stranger_is_refused_or_capped() -> None:
    """Cursors never pass the head; a non-member cannot acknowledge."""
    world = World()
    a, b = _two(world)
    m = world.login(MALLORY)
    assert world.error(m, w.Ack("ab", 1)) == "not_a_member"
    world.send(b, w.Ack("ab", 100))
    world.send(a, w.Ack("ab", 100))
    world.ok(a, w.Post(world.req(), "ab", "o", b"x"))
    assert world.core.statistics().held_ops == 1  # acks before it existed did not cover it


def test_retention_drops_unacknowledged_ops_after_24_hours() -> None:
    """Default retention is 24 h: an op survives a tick at 86399 s and is gone at 86400 s."""
    world = World()
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o1", b"x"), now=0.0)
    world.ok(a, w.Post(world.req(), "ab", "o2", b"x"), now=100.0)
    world.tick(86_399.0)
    assert world.core.statistics().held_ops == 2
    world.tick(86_400.0)
    assert world.core.statistics().held_ops == 1
    world.tick(86_500.0)
    assert world.core.statistics().held_ops == 0
    b2 = world.login(BOB, device="dev-9", resume=False)
    [resumed] = world.ok(b2, w.Resume(world.req(), {"ab": 0}))
    assert isinstance(resumed, w.Resumed) and resumed.rooms == [w.ResumedRoom("ab", 3, 2)]


def test_retention_is_configurable() -> None:
    """--retention shortens how long ops are held."""
    world = World(RelayConfig(retention=60.0))
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o1", b"x"), now=0.0)
    world.tick(59.0)
    assert world.core.statistics().held_ops == 1
    world.tick(60.0)
    assert world.core.statistics().held_ops == 0


def test_op_body_over_one_mebibyte_is_too_large() -> None:
    """1 MiB is accepted, one byte more is not."""
    world = World()
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "big", b"x" * (1 << 20)))
    bigger = w.Post(world.req(), "ab", "bigger", b"x" * ((1 << 20) + 1))
    assert world.error(a, bigger) == "too_large"


def test_op_rate_is_limited_per_identity_and_refills() -> None:
    """After the burst, posts are rate_limited until tokens refill."""
    world = World(RelayConfig(op_rate=2.0, op_burst=3.0))
    a, b = _two(world)
    for i in range(3):
        world.ok(a, w.Post(world.req(), "ab", f"o{i}", b"x"), now=10.0)
    assert world.error(a, w.Post(world.req(), "ab", "o3", b"x"), now=10.0) == "rate_limited"
    world.ok(b, w.Post(world.req(), "ab", "b0", b"x"), now=10.0)  # Bob has his own bucket
    world.ok(a, w.Post(world.req(), "ab", "o3", b"x"), now=10.5)


def test_backlog_cap_refuses_posts_until_acknowledged() -> None:
    """A room whose slowest device holds max_backlog ops refuses more with backlog_full."""
    world = World(RelayConfig(max_backlog=3))
    a, b = _two(world)
    for i in range(3):
        world.ok(a, w.Post(world.req(), "ab", f"o{i}", b"x"))
    assert world.error(a, w.Post(world.req(), "ab", "o3", b"x")) == "backlog_full"
    world.send(a, w.Ack("ab", 3))
    world.send(b, w.Ack("ab", 2))
    world.ok(a, w.Post(world.req(), "ab", "o3", b"x"))


def test_restart_from_storage_keeps_rooms_log_head_and_cursors() -> None:
    """A new core on the same storage continues the sequence and replays held ops."""
    storage = MemoryStorage()
    world = World(storage=storage)
    a, b = _two(world)
    for i in range(3):
        world.ok(a, w.Post(world.req(), "ab", f"o{i}", b"x"))
    world.send(a, w.Ack("ab", 3))
    world.send(b, w.Ack("ab", 1))
    reborn = World(storage=storage)
    b2 = reborn.login(BOB, resume=False)
    got = reborn.ok(b2, w.Resume(reborn.req(), {"ab": 1}))
    assert _seqs(got) == [2, 3]
    a2 = reborn.login(ALICE)
    [posted] = reborn.ok(a2, w.Post(reborn.req(), "ab", "o3", b"x"))
    assert isinstance(posted, w.Posted) and posted.seq == 4
    [posted] = reborn.ok(a2, w.Post(reborn.req(), "ab", "o1", b"x"))  # still deduplicated
    assert isinstance(posted, w.Posted) and posted.seq == 2
    assert frames_of(reborn.take(b2), w.Op)


def test_a_slow_member_leaving_releases_what_only_it_was_holding() -> None:
    """Ops held for a member who never acknowledges are dropped once that member leaves."""
    world = World()
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o1", b"x"))
    world.send(a, w.Ack("ab", 1))
    assert world.core.statistics().held_ops == 1
    world.ok(b, w.Leave(world.req(), "ab"))
    assert world.core.statistics().held_ops == 0
    assert world.storage.load().rooms[0].ops == []


def test_negative_cursor_in_resume_is_bad_frame_and_changes_nothing() -> None:
    """Resume validates every cursor before replaying anything."""
    world = World()
    a, _ = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "o1", b"x"))
    b2 = world.login(BOB, device="dev-2", resume=False)
    assert world.error(b2, w.Resume(world.req(), {"ab": -1})) == "bad_frame"
    assert world.take(b2) == []
    world.ok(a, w.Post(world.req(), "ab", "o2", b"x"))
    assert world.take(b2) == []  # still not live


def test_another_relay_node_answers_the_retry_from_the_stored_departure() -> None:
    """Relay nodes on NATS: the removal is decided on one node, Alice retries on another. The
    other node applies the stored membership message (with the departed member's ops) and
    answers her retry with its seq."""
    world = World()
    a, b = _two(world)
    world.ok(a, w.Post(world.req(), "ab", "mine", b"x"))
    world.close(a)
    world.send(b, w.Ack("ab", 1))
    other = RoomBook()
    other.load(world.storage.load())  # the other node, as of before the removal
    before = len(world.writes())
    world.ok(b, w.Remove(world.req(), "ab", ALICE.fp))
    removal = world.writes()[before:]
    membership = list(itertools.takewhile(
        lambda x: isinstance(x, MemberDeleted | MemberPut | DepartedOps), removal))
    assert any(isinstance(x, DepartedOps) for x in membership), removal

    def ignore(*_: object) -> None:
        pass

    apply_stored(other, SlotTable(ttl=60.0, grant_ttl=60.0, max_open=3), membership, BOB.fp,
                 ignore, ignore, ignore, [])
    other.drop_through(other.rooms["ab"], 1)  # the prune, stored as a message of its own
    assert other.own_seq("ab", ALICE.fp, "mine") == (1, 0.0)  # departed: its time not kept
    assert other.own_seq("ab", BOB.fp, "mine") is None
