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
from crosstalk.daemon import Daemon
from crosstalk.features.feature import Feature, Plugs
from crosstalk.paths import Home
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
