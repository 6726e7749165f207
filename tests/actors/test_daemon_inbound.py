"""What the relay link records, the room's own actor applies: after the router's wake, and after
a crash between the two commits."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import trio
import trio.testing

from crosstalk.actors.relay_link import LinkTimings, RelaySocket
from crosstalk.actors.relay_link_store import SqliteLinkStore
from crosstalk.actors.supervisor import Supervisor
from crosstalk.daemon.tree import Daemon
from crosstalk.features import attention, messages
from crosstalk.paths import Home
from crosstalk.store import room_log
from crosstalk.store.db import _run_write
from crosstalk.store.identity import IdentityRecord, save_identity
from crosstalk.wire.relay_log import Op
from tests.actors.fakes import running
from tests.actors.test_room_hold import ANA, BEN, ROOM, _sealed, room_store

R = TypeVar("R")


@asynccontextmanager
async def _unreachable(url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
    """A relay that never answers: the link keeps dialling, nothing else happens."""
    await trio.sleep_forever()
    yield  # never reached: the connection never opens


async def test_an_op_the_link_records_is_applied_by_its_room_once_woken() -> None:
    """The link's commit only records the op (the room's applied cursor stays); the room's
    actor applies it once the router wakes the room."""
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        async with room_store() as store, running(Supervisor(heartbeat=5.0)) as sup:
            daemon = Daemon(home, store, sup, 5.0, features=(), connect=_unreachable)
            await daemon.start()
            await trio.testing.wait_all_tasks_blocked()
            await daemon.link_store.commit_inbound_many([_op()], 100.0)
            assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 0
            await daemon.wake_room(ROOM)  # what the router does with the link's InboundOp
            await trio.testing.wait_all_tasks_blocked()
            assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 1


async def test_an_op_recorded_before_a_crash_is_applied_when_the_daemon_starts() -> None:
    """A crash between the link's commit (acknowledged to the relay) and the room's loses
    nothing: the next daemon's room catches up from the store at start, unwoken."""
    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        async with room_store() as store:
            await SqliteLinkStore(store).commit_inbound_many([_op()], 100.0)
            async with running(Supervisor(heartbeat=5.0)) as sup:
                daemon = Daemon(home, store, sup, 5.0, features=(), connect=_unreachable)
                await daemon.start()
                await trio.testing.wait_all_tasks_blocked()
                assert await store.read(lambda conn: room_log.applied_cursor(conn, ROOM)) == 1


def _op() -> Op:
    return Op(room=ROOM, seq=1, sender=BEN.fingerprint, op_id="b1", body=_sealed(BEN, "b1"),
              ts=1.0)


async def test_a_message_is_held_and_decided_in_one_commit() -> None:
    """With the real messages and attention features, the room's commit that holds a message
    also holds the gate's notice for it: no commit ever has one without the other (the gate
    decides in the room's transaction, not in a transaction of its own after it)."""
    seen: list[tuple[int, int]] = []  # (held, notices) after each commit

    async def recording(fn: Callable[..., R], *args: Any, limiter: object = None) -> R:
        result = fn(*args)  # inline, as the store runs it
        if fn is _run_write:
            conn: sqlite3.Connection = args[0]
            held = conn.execute("SELECT count(*) FROM held_messages").fetchone()[0]
            seen.append((held, conn.execute("SELECT count(*) FROM notices").fetchone()[0]))
        await trio.lowlevel.checkpoint()
        return result

    with tempfile.TemporaryDirectory(prefix="ct-") as root:
        home = Home(Path(root))
        save_identity(home.identity, IdentityRecord(
            "ana", "m", ANA.ed_seed, ANA.x_secret, 0.0), keyring=False)
        async with room_store(recording) as store, running(Supervisor(heartbeat=5.0)) as sup:
            features = (messages.FEATURE, attention.FEATURE)
            daemon = Daemon(home, store, sup, 5.0, features=features, connect=_unreachable)
            await daemon.start()
            await trio.testing.wait_all_tasks_blocked()
            await daemon.link_store.commit_inbound_many([_op()], 100.0)
            await daemon.wake_room(ROOM)
            await trio.testing.wait_all_tasks_blocked()
    assert (1, 1) in seen
    assert all(held == notices for held, notices in seen), seen
