"""A send is one transaction: the outbox row, what the caller keeps about it and what each
feature's sent writer keeps are committed together."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import Daemon
from crosstalk.features import memory, threads
from crosstalk.features.feature import Feature, Plugs
from crosstalk.paths import Home
from crosstalk.store import messages
from crosstalk.store.db import run_inline
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.wire.room_ops import MessageOp, RoomOp
from tests.actors.fakes import running
from tests.actors.test_daemon_inbound import _unreachable
from tests.actors.test_room_hold import ANA, ROOM, room_store


class _Writes:
    """The store's runner, counting write transactions (the limiter tells them apart)."""

    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, fn: Callable[..., Any], *args: Any, limiter: Any = None) -> Any:
        if limiter is not None and fn.__name__ == "_run_write":
            self.count += 1
        return await run_inline(fn, *args, limiter=limiter)


def _note(what: str) -> Callable[[sqlite3.Connection], None]:
    def note(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO settings (key, value) VALUES (?, '1')", (what,))

    return note


def _kept(conn: sqlite3.Connection, room_id: str, op_id: str, op: RoomOp) -> None:
    _note(f"kept {op_id}")(conn)


KEEPER = Feature("keeper", lambda caps: Plugs(sent_writers=(_kept,)))


async def test_a_send_commits_its_records_with_the_outbox_row() -> None:
    """send_op's ``also`` and the features' sent writers are written in the one transaction
    that queues the op: no write of their own."""
    writes = _Writes()
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        async with room_store(writes) as store, running(Supervisor(heartbeat=5.0)) as sup:
            daemon = Daemon(home, store, sup, 5.0, features=(KEEPER,), connect=_unreachable)
            await daemon.start()
            await daemon.room_inbox(ROOM)
            await trio.testing.wait_all_tasks_blocked()
            before = writes.count
            await daemon.send_op(ROOM, MessageOp(msg_id="m1", text="hi"), op_id="m1",
                                 also=_note("also m1"))
            assert writes.count - before == 1
            queued = await store.read(lambda conn: conn.execute(
                "SELECT count(*) FROM outbox WHERE op_id = 'm1'").fetchall())
            notes = await store.read(lambda conn: conn.execute(
                "SELECT key FROM settings WHERE key LIKE '% m1' ORDER BY key").fetchall())
            assert (queued, notes) == ([(1,)], [("also m1",), ("kept m1",)])


async def _daemon_with(
    home: Home, store: Any, sup: Supervisor, *features: Feature
) -> Daemon:
    save_identity(home.identity, IdentityRecord(
        "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
    daemon = Daemon(home, store, sup, 5.0, features=features, connect=_unreachable)
    await daemon.start()
    await daemon.room_inbox(ROOM)
    await trio.testing.wait_all_tasks_blocked()
    return daemon


async def test_a_closing_summary_is_kept_in_the_commit_that_queues_it() -> None:
    """``thread_close`` writes the closing, then one commit per room it tells: the summary's
    sent row rides the outbox row, with no write of its own."""
    writes = _Writes()
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        async with room_store(writes) as store, running(Supervisor(heartbeat=5.0)) as sup:
            daemon = await _daemon_with(Home(Path(root)), store, sup, threads.FEATURE)
            await store.write(lambda conn: messages.record_sent(
                conn, msg_id="m0", room_id=ROOM, to_label="ben", kind="message", chars=2,
                created_at=1.0, thread="t1", reply_to=None, text="hi"))
            before = writes.count
            reply = await daemon.ops.call("thread_close", {"id": "t1", "summary": "done"})
            assert reply["told"] == ["team"]
            assert writes.count - before == 2  # the closing, then the summary's outbox commit
            kept = await store.read(lambda conn: conn.execute(
                "SELECT s.text FROM sent_messages s JOIN outbox o ON o.op_id = s.msg_id "
                "WHERE s.thread = 't1'").fetchall())
            assert kept == [("done",)]


async def test_a_memory_op_keeps_its_plaintext_in_the_commit_that_queues_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A memory write is one commit: the op's plaintext (``memory_sent``) rides its outbox row."""
    writes = _Writes()
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        async with room_store(writes) as store, running(Supervisor(heartbeat=5.0)) as sup:
            daemon = await _daemon_with(Home(Path(root)), store, sup, memory.FEATURE)
            before = writes.count
            reply = await daemon.ops.call("fact_add", {"text": "the sky is blue", "room": "team"})
            assert reply["outcome"] == "pending"  # no relay: it stays queued
            assert writes.count - before == 1
            kept = await store.read(lambda conn: conn.execute(
                "SELECT count(*) FROM memory_sent s JOIN outbox o ON o.op_id = s.op_id"
            ).fetchall())
            assert kept == [(1,)]
