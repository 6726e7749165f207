"""Receipts are owed in the transaction that holds or reads a message, and posted after it.

The ``ack`` marks messages read and records the ``read`` receipts owed in one transaction; the
receipts actor posts them afterwards and forgets them only once the post is committed to the
outbox. So a post cancelled after the ack's commit (a client giving up, a timeout, the daemon
killed) is still made: by the next drain, at the latest when the daemon starts again.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import trio
import trio.testing
from trio.testing import MockClock

from crosstalk.actors.children import start_children
from crosstalk.actors.control import OpTable
from crosstalk.actors.receipts import LINGER, ReceiptsActor, wake
from crosstalk.actors.relay_link_api import OutboxWrite
from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.room import Applied
from crosstalk.errors import CrosstalkError, NotAMember, RelayUnreachable
from crosstalk.features.feature import Plugs
from crosstalk.features.read import ops as read_ops
from crosstalk.store import messages
from crosstalk.store.db import Store, open_store
from crosstalk.store.membership import invited_again, mark_removed
from crosstalk.store.receipts import owe, owed
from crosstalk.wire.room_ops import MessageOp, Receipt, RoomOp
from tests.actors.fakes import running

ME, BEN = "me" * 8, "be" * 8


class Posts:
    """A fake ``send_op``: records each op it commits, committing its ``also`` to ``store`` as
    the outbox commit would; ``hang`` never commits (a stuck post); ``fail`` raises instead."""

    def __init__(
        self, store: Store, *, hang: bool = False, fail: CrosstalkError | None = None
    ) -> None:
        self.store, self.hang, self.fail = store, hang, fail
        self.posted: list[tuple[str, RoomOp]] = []
        self.attempted = trio.Event()
        self.changed = trio.Event()

    async def __call__(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        self.attempted.set()
        if self.hang:
            await trio.sleep_forever()
        if self.fail is not None:
            raise self.fail
        if also is not None:
            await self.store.write(also)
        self.posted.append((room_id, op))
        self.changed.set()
        self.changed = trio.Event()
        return op_id or f"op{len(self.posted)}"


def _room_with_two_unread(conn: sqlite3.Connection) -> None:
    for room in ("r1", "r2"):
        conn.execute(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, ?, 'shared', 'joined', 0)",
            (room, room),
        )
    for msg_id, at in (("a1" * 16, 1.0), ("a2" * 16, 2.0)):
        messages.hold(conn, message_id=msg_id, room_id="r1", sender=BEN, to=None, intent="fyi",
                      body='{"text": "hi"}', received_at=at)


def _plugged(store: Store, supervisor: Supervisor, posts: Posts) -> tuple[OpTable, Plugs]:
    """The read feature plugged into a host that has only what it asks for: a store, a
    supervisor, ``posts`` for its ``send_op`` and an identity."""
    host = SimpleNamespace(
        store=store, supervisor=supervisor, send_op=posts, identity=object(),
        keys=SimpleNamespace(fingerprint=ME),
    )
    plugs = read_ops.plug(cast(read_ops.Host, host))
    ops = OpTable()
    for control_op in plugs.ops:
        control_op.install(ops)
    return ops, plugs


async def _daemon(store: Store, supervisor: Supervisor, posts: Posts) -> OpTable:
    """The read feature's ops, with its declared children started (the receipts actor)."""
    ops, plugs = _plugged(store, supervisor, posts)
    await start_children(supervisor, plugs.children)
    return ops


async def test_an_ack_whose_receipt_post_is_cancelled_sends_it_after_a_restart(
    tmp_path: Path,
) -> None:
    """The ack commits; its receipt's post hangs and the daemon dies. The receipt is still owed
    in the store, and the next daemon's receipts actor posts it and then owes nothing."""
    path = tmp_path / "state.db"
    a1, a2 = "a1" * 16, "a2" * 16
    async with open_store(path) as store:
        await store.write(_room_with_two_unread)
        stuck = Posts(store, hang=True)
        async with running(Supervisor(heartbeat=5.0)) as supervisor:
            ops = await _daemon(store, supervisor, stuck)
            lease = (await ops.call("read", {}))["lease"]
            assert await ops.call("ack", {"lease": lease}) == {"acked": 2}
            with trio.fail_after(5):
                await stuck.attempted.wait()  # posting when the daemon dies
        assert stuck.posted == []
        [left] = await store.read(owed)
        assert (left.room_id, left.state, left.msg_ids) == ("r1", "read", (a1, a2))

    async with open_store(path) as store:  # the daemon starts again
        posts = Posts(store)
        async with running(Supervisor(heartbeat=5.0)) as supervisor:
            await _daemon(store, supervisor, posts)
            with trio.fail_after(5):
                while not posts.posted:
                    await posts.changed.wait()
            with trio.fail_after(5):  # the rows go in the store's worker thread: poll them
                while await store.read(owed):  # noqa: ASYNC110
                    await trio.sleep(0.01)
        assert posts.posted == [("r1", Receipt("read", (a1, a2)))]


async def test_a_read_and_a_delivered_receipt_are_owed_with_the_change_they_report(
    tmp_path: Path,
) -> None:
    """The applier owes ``delivered`` for someone else's message (not ours); the ack owes
    ``read``; acknowledging again owes nothing more."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room_with_two_unread)
        posts = Posts(store, hang=True)  # nothing leaves: we look at what is owed
        async with running(Supervisor(heartbeat=5.0)) as supervisor:
            ops, plugs = _plugged(store, supervisor, posts)
            [owe_delivered] = plugs.appliers

            def apply(conn: sqlite3.Connection) -> None:
                for op_id, sender in (("b1" * 16, BEN), ("b2" * 16, ME)):
                    op = MessageOp(msg_id=op_id, text="hi")
                    owe_delivered(conn, Applied("r2", 1, op_id, sender, 1.0, op))

            await store.write(apply)
            await ops.call("ack", {"ids": ["a1" * 16]})
            await ops.call("ack", {"ids": ["a1" * 16]})
            pending = await store.read(owed)
        assert {(o.room_id, o.state, o.msg_ids) for o in pending} == {
            ("r2", "delivered", ("b1" * 16,)),
            ("r1", "read", ("a1" * 16,)),
        }


async def test_a_room_we_left_drops_its_receipt_and_a_passing_failure_keeps_it(
    tmp_path: Path,
) -> None:
    """A room we do not have (left, forgotten): nowhere to send it, forgotten. RelayUnreachable:
    kept, posted next time."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room_with_two_unread)
        await store.write(lambda c: owe(c, "read", "gone", ["c1" * 16], 1.0))
        nobody = Posts(store)
        assert await ReceiptsActor(store=store, send_op=nobody, ready=lambda: True).drain() is False
        assert nobody.posted == [] and await store.read(_rows) == []

        await store.write(lambda c: owe(c, "delivered", "r1", ["d1" * 16], 2.0))
        down = Posts(store, fail=RelayUnreachable("not yet"))
        assert await ReceiptsActor(store=store, send_op=down, ready=lambda: True).drain() is True
        assert len(await store.read(owed)) == 1
        up = Posts(store)
        assert await ReceiptsActor(store=store, send_op=up, ready=lambda: True).drain() is False
        assert up.posted == [("r1", Receipt("delivered", ("d1" * 16,)))]
        assert await store.read(owed) == []
        await store.write(lambda c: owe(c, "read", "local", ["e1" * 16], 3.0))
        assert await store.read(owed) == []  # a local message: nobody to tell


async def test_a_read_while_removed_is_told_once_we_are_let_back_in(tmp_path: Path) -> None:
    """Removed from r1, we read what we held: the receipt waits (nothing is posted, nothing is
    dropped); invited back and joined again, it is posted. A refusal from a room removed under
    the drain's feet keeps the rows too, and other rooms still drain."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room_with_two_unread)
        await store.write(lambda c: mark_removed(c, "r1", BEN, 5.0))
        await store.write(lambda c: owe(c, "read", "r1", ["a1" * 16], 6.0))
        posts = Posts(store)
        assert await ReceiptsActor(store=store, send_op=posts, ready=lambda: True).drain() is False
        assert posts.posted == [] and len(await store.read(_rows)) == 1

        await store.write(lambda c: invited_again(c, "r1"))
        assert await ReceiptsActor(store=store, send_op=posts, ready=lambda: True).drain() is False
        assert posts.posted == [] and len(await store.read(_rows)) == 1  # invited: not yet

        await store.write(lambda c: c.execute("UPDATE rooms SET state = 'joined'"))
        assert await ReceiptsActor(store=store, send_op=posts, ready=lambda: True).drain() is False
        assert posts.posted == [("r1", Receipt("read", ("a1" * 16,)))]
        assert await store.read(_rows) == []

        await store.write(lambda c: owe(c, "read", "r1", ["a2" * 16], 7.0))
        await store.write(lambda c: owe(c, "read", "r2", ["b2" * 16], 8.0))
        refused = RoomRefuses(store, "r1")
        actor = ReceiptsActor(store=store, send_op=refused, ready=lambda: True)
        assert await actor.drain() is False
        assert refused.posted == [("r2", Receipt("read", ("b2" * 16,)))]
        assert [row[1] for row in await store.read(_rows)] == ["r1"]


class RoomRefuses(Posts):
    """Posts everywhere but ``room``, which says we are not a member (removed just now)."""

    def __init__(self, store: Store, room: str) -> None:
        super().__init__(store)
        self.room = room

    async def __call__(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        if room_id == self.room:
            raise NotAMember("removed")
        return await super().__call__(room_id, op, op_id=op_id, also=also)


class OwedAfterEach(Posts):
    """Posts, and notes what is still owed as soon as each post's commit returned."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.owed_after: list[list[tuple[str, str, str]]] = []

    async def __call__(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        posted = await super().__call__(room_id, op, op_id=op_id, also=also)
        self.owed_after.append(await self.store.read(_rows))
        return posted


async def test_a_receipt_is_owed_no_more_once_the_commit_that_queues_it_returns(
    tmp_path: Path,
) -> None:
    """The owed rows a receipt covers go in the very commit that queues its post: never owed
    and queued at once, and no commit of their own."""
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room_with_two_unread)
        await store.write(lambda c: owe(c, "read", "r1", ["a1" * 16], 1.0))
        await store.write(lambda c: owe(c, "delivered", "r2", ["b1" * 16], 2.0))
        posts = OwedAfterEach(store)
        assert await ReceiptsActor(store=store, send_op=posts, ready=lambda: True).drain() is False
        assert posts.owed_after == [[("delivered", "r2", "b1" * 16)], []]


class Timed(Posts):
    """Posts, noting the (virtual) time of each."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.at: list[float] = []

    async def __call__(
        self, room_id: str, op: RoomOp, *, op_id: str | None = None,
        also: OutboxWrite | None = None,
    ) -> str:
        self.at.append(trio.current_time())
        return await super().__call__(room_id, op, op_id=op_id, also=also)


async def test_messages_held_within_the_linger_share_one_receipt(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """Three messages held a tenth of a second apart, each waking the actor: one ``delivered``
    receipt names all three, posted ``LINGER`` after the first wake (not later: the linger
    starts at the first wake, the later ones do not push it back). One held later gets its own,
    LINGER after its wake. Without the linger this is four posts."""
    ids = [f"{n}0" * 16 for n in range(1, 5)]
    async with open_store(tmp_path / "state.db") as store:
        await store.write(_room_with_two_unread)
        posts = Timed(store)
        async with running(Supervisor(heartbeat=0.1)) as supervisor:  # linger > heartbeat
            actor = ReceiptsActor(store=store, send_op=posts, ready=lambda: True)
            inbox = await supervisor.start_actor("receipts", actor, inbox_size=1)
            await trio.testing.wait_all_tasks_blocked()  # its drain at start: nothing owed
            start = trio.current_time()
            for n, msg in enumerate(ids[:3]):
                await store.write(lambda c, m=msg: owe(c, "delivered", "r1", [m], 1.0))
                wake(inbox)
                if n < 2:
                    await trio.sleep(0.1)
            with trio.fail_after(5):
                while not posts.posted:
                    await posts.changed.wait()
            await trio.sleep(1.0)
            await store.write(lambda c: owe(c, "delivered", "r1", [ids[3]], 2.0))
            late = trio.current_time()
            wake(inbox)
            with trio.fail_after(5):
                while len(posts.posted) < 2:
                    await posts.changed.wait()
            [health] = supervisor.statistics()
            assert health.restarts == 0
        assert posts.posted == [("r1", Receipt("delivered", tuple(ids[:3]))),
                                ("r1", Receipt("delivered", (ids[3],)))]
        assert posts.at == [start + LINGER, late + LINGER]


def _rows(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    return [(str(s), str(r), str(m)) for s, r, m in
            conn.execute("SELECT state, room_id, msg_id FROM receipts_owed ORDER BY id")]
