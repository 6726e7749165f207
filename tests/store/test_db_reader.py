"""The store's read connection: reads see what is committed and never wait for a write."""

from __future__ import annotations

import functools
import sqlite3
import threading
from pathlib import Path

import trio

from crosstalk.store.db import open_store
from crosstalk.store.settings import get_setting, set_setting

HOLD = 10.0  # the longest a test write may stay open; reaching it fails the test


async def test_a_read_runs_while_a_write_is_still_open(tmp_path: Path) -> None:
    """A read finishes while another task's write transaction is still open, and sees only
    what was committed before that write began."""
    write_open, read_done = threading.Event(), threading.Event()

    def slow_write(conn: sqlite3.Connection) -> bool:
        set_setting(conn, "k", "uncommitted")
        write_open.set()
        return read_done.wait(HOLD)  # the read must finish while we hold the transaction

    # In worker threads, so the write can stay open while the read runs (inline, the default,
    # a transaction never overlaps another).
    async with open_store(tmp_path / "state.db", run_sync=trio.to_thread.run_sync) as store:
        await store.write(lambda conn: set_setting(conn, "k", "committed"))
        seen: list[object] = []
        async with trio.open_nursery() as nursery:
            writing: list[bool] = []

            async def write() -> None:
                writing.append(await store.write(slow_write))

            nursery.start_soon(write)
            assert await trio.to_thread.run_sync(write_open.wait, HOLD)
            with trio.fail_after(HOLD):
                seen.append(await store.read(lambda conn: get_setting(conn, "k")))
            read_done.set()
        assert seen == ["committed"]
        assert writing == [True]
        assert await store.read(lambda conn: get_setting(conn, "k")) == "uncommitted"


async def test_a_read_after_a_write_returned_sees_it(tmp_path: Path) -> None:
    """Commit-before-acknowledge holds across the two connections: a read that starts after
    ``write`` returned sees that write."""
    async with open_store(tmp_path / "state.db") as store:
        for n in range(20):
            await store.write(functools.partial(set_setting, key="n", value=n))
            assert await store.read(lambda conn: get_setting(conn, "n")) == n
