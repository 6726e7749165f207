"""Finding a fact or task by id applies our own sequenced ops first (features/memory)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crosstalk.errors import CrosstalkError, UnknownTask
from crosstalk.features.memory import handle
from crosstalk.features.memory.handle import MemoryFeature
from crosstalk.store.db import open_store
from crosstalk.wire.control.params import Where
from crosstalk.wire.memory import TaskAdd
from tests.store.test_memory_store import ANA, ROOM, env, room_db, sent


@pytest.mark.parametrize("plant", [False, True])
async def test_our_own_task_is_found_once_the_relay_has_sequenced_it(
    tmp_path: Path, plant: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ana added t1; the relay sequenced it (seq 1) but nothing has applied it here yet (her
    add answered pending, say). Claiming it finds it. The planted bug looks it up without
    catching up: "There is no task"."""
    conn = room_db(tmp_path / "state.db")
    sent(conn, 1, env(TaskAdd("t1", "rotate the key"), "ana", 1.0), "mine-1")
    conn.execute("COMMIT")
    conn.close()
    if plant:
        async def nothing(self: MemoryFeature, rooms: list[Any]) -> None:
            pass

        monkeypatch.setattr(handle.MemoryFeature, "catch_up_own", nothing)
    async with open_store(tmp_path / "state.db") as store:
        daemon = SimpleNamespace(store=store, keys=ANA, identity=SimpleNamespace(label="ana"))
        feature = MemoryFeature(daemon)  # type: ignore[arg-type]
        if plant:
            with pytest.raises(UnknownTask):
                await feature.record_in("task", Where(room=ROOM), "t1")
            return
        room, task = await feature.record_in("task", Where(room=ROOM), "t1")
    assert (room.room_id, task) == (ROOM, "t1")


@pytest.mark.parametrize(("kind", "code"), [("task", "unknown_task"), ("fact", "unknown_fact")])
async def test_a_missing_task_or_fact_is_not_found_not_a_usage_error(
    tmp_path: Path, kind: str, code: str
) -> None:
    """`tasks claim nope` (and the MCP tool) is told the task is unknown, exit 1, not `usage`."""
    conn = room_db(tmp_path / "state.db")
    conn.execute("COMMIT")
    conn.close()
    async with open_store(tmp_path / "state.db") as store:
        daemon = SimpleNamespace(store=store, keys=ANA, identity=SimpleNamespace(label="ana"))
        feature = MemoryFeature(daemon)  # type: ignore[arg-type]
        with pytest.raises(CrosstalkError) as raised:
            await feature.record_in(kind, Where(room=ROOM), "nope")
    assert raised.value.code == code and f"no {kind} 'nope'" in raised.value.message
