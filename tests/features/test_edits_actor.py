"""The edits actor under a virtual clock: a burst of edits is one op per room per debounce, a
room that stops sharing hears nothing more, a failed post is tried again (a real store)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio
import trio.testing

from crosstalk.actors.supervisor import Supervisor
from crosstalk.core.edits import DEBOUNCE, RETRY, Source
from crosstalk.errors import RelayUnreachable
from crosstalk.features.edits.actor import EditsActor, Touched
from crosstalk.store import edits as db
from crosstalk.store.db import Store, open_store
from crosstalk.wire.room_ops import EditedPath, EditsPublished, RoomOp
from tests.actors.fakes import running

NOW = 1_000_000.0  # the wall clock the actor reads (Unix time), fixed
S1 = Source("s1", "shop")
Post = tuple[str, EditsPublished, float]


class Posts:
    """A fake ``send_op``: each post goes to ``out`` with the virtual time; ``fail`` rooms
    raise a passing failure once."""

    def __init__(self, out: trio.MemorySendChannel[Post], fail: set[str] | None = None) -> None:
        self.out, self.fail = out, fail or set()

    async def __call__(self, room_id: str, op: RoomOp, *, op_id: str | None = None) -> str:
        if room_id in self.fail:
            self.fail.discard(room_id)
            raise RelayUnreachable("not now")
        assert isinstance(op, EditsPublished)
        self.out.send_nowait((room_id, op, trio.current_time()))
        return "op"


def _rooms(conn: sqlite3.Connection) -> None:
    for room in ("r1", "r2"):
        conn.execute(
            "INSERT INTO rooms (room_id, name, kind, state, created_at) "
            "VALUES (?, ?, 'shared', 'joined', 0)", (room, room),
        )


async def _edit(store: Store, *paths: str) -> None:
    def write(conn: sqlite3.Connection) -> None:
        kept = db.own_set(conn, "s1", "shop")
        db.replace_own(conn, "s1", "shop", [*(EditedPath(p, NOW) for p in paths), *kept], 0.0)

    await store.write(write)


async def _next(posts: trio.MemoryReceiveChannel[Post], within: float) -> tuple[str, list[str],
                                                                                   float]:
    with trio.fail_after(within):
        room, op, at = await posts.receive()
    return room, [p.path for p in op.paths], at


async def test_a_burst_is_one_op_per_room_per_debounce_and_off_rooms_hear_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """t=0: told at once in both rooms. Edits at 1 and 2: one op at DEBOUNCE with both files.
    Sharing turned off in r2, then an edit at 10: only r1 hears of it, at 10."""
    send, posts = trio.open_memory_channel[Post](32)
    async with open_store(tmp_path / "state.db") as store, \
            running(Supervisor(heartbeat=5.0)) as supervisor:
        await store.write(_rooms)
        actor = EditsActor(store=store, send_op=Posts(send), wall=lambda: NOW)
        inbox = await supervisor.start_actor("edits", actor)
        start = trio.current_time()
        await _edit(store, "a.py")
        await inbox.send(Touched(S1, ("r1", "r2"), "fixing checkout"))
        first = [await _next(posts, 1), await _next(posts, 1)]
        assert sorted(first) == [("r1", ["a.py"], start), ("r2", ["a.py"], start)]
        await trio.sleep_until(start + 1)
        await _edit(store, "b.py")
        await inbox.send(Touched(S1, ("r1", "r2")))
        await trio.sleep_until(start + 2)
        await _edit(store, "c.py")
        await inbox.send(Touched(S1, ("r1", "r2")))
        burst = sorted([await _next(posts, DEBOUNCE), await _next(posts, DEBOUNCE)])
        assert burst == [("r1", ["a.py", "b.py", "c.py"], start + DEBOUNCE),
                         ("r2", ["a.py", "b.py", "c.py"], start + DEBOUNCE)]

        await store.write(lambda c: db.set_room_shared(c, "r2", False))
        await trio.sleep_until(start + 10)
        await _edit(store, "d.py")
        await inbox.send(Touched(S1, ("r1", "r2")))
        assert (await _next(posts, 1))[::2] == ("r1", start + 10)
        with trio.move_on_after(60):
            got = await posts.receive()
            raise AssertionError(f"r2 turned sharing off, yet heard {got}")


async def test_a_failed_post_is_tried_again_after_the_retry(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    send, posts = trio.open_memory_channel[Post](32)
    async with open_store(tmp_path / "state.db") as store, \
            running(Supervisor(heartbeat=5.0)) as supervisor:
        await store.write(_rooms)
        actor = EditsActor(store=store, send_op=Posts(send, fail={"r1"}), wall=lambda: NOW)
        inbox = await supervisor.start_actor("edits", actor)
        start = trio.current_time()
        await _edit(store, "a.py")
        await inbox.send(Touched(S1, ("r1",), "n"))
        room, paths, at = await _next(posts, RETRY + 1)
        assert (room, paths, at) == ("r1", ["a.py"], start + RETRY)
