"""The asks feature's mailroom: what it reads after each committed batch."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from crosstalk.core.room import Applied
from crosstalk.core.triage import Kind
from crosstalk.features.asks.ops import Mailroom
from crosstalk.store.db import connect
from crosstalk.wire.room_ops import MessageOp


class _Keys:
    fingerprint = "me"


class _CountingStore:
    """Counts reads; answers them from a fresh ``state.db``."""

    def __init__(self, path: Path) -> None:
        self.reads = 0
        self._conn = connect(path)

    async def read(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        self.reads += 1
        return fn(self._conn)


class _Daemon:
    def __init__(self, path: Path) -> None:
        self.store = _CountingStore(path)
        self.keys = _Keys()


def _arrival(kind: Kind = Kind.MESSAGE) -> Applied:
    op = MessageOp(msg_id="m1", text="hello", kind=kind, from_label="ben")
    return Applied("r1", 1, "m1", "ben-fp", 1.0, op, 1)


async def test_a_batch_nobody_watches_or_waits_on_costs_no_read(tmp_path: Path) -> None:
    """No watcher and no ask of ours waiting: the batch wakes ``wait`` and reads nothing."""
    daemon = _Daemon(tmp_path / "state.db")
    mailroom = Mailroom(daemon)  # type: ignore[arg-type]  # only store and keys are used
    arrived = mailroom.arrived
    await mailroom.applied([_arrival(), _arrival(Kind.ASK)])
    assert daemon.store.reads == 0
    assert arrived.is_set()


async def test_a_watcher_is_told_the_batch_ids_without_a_read(tmp_path: Path) -> None:
    """A watcher is told which messages arrived; its stream reads them as ``read`` shows them
    (tests/e2e/test_watch.py), so the mailroom reads nothing for it."""
    daemon = _Daemon(tmp_path / "state.db")
    mailroom = Mailroom(daemon)  # type: ignore[arg-type]
    send, receive = trio.open_memory_channel[list[str]](4)
    mailroom.watchers.add(send)
    await mailroom.applied([_arrival()])
    assert daemon.store.reads == 0
    assert receive.receive_nowait() == ["m1"]
