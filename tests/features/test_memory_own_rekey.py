"""Our own rekey is applied to room memory once the relay sequences it (features/memory).

The simulation's seed 236: n2 removed n1 and the room stayed quiet after. The relay never echoes
our own ops, and nothing watched the rekey (only memory ops of ours that answered ``pending``
were), so n2's memory never applied it: n1's reservations lapsed at its seq on every replica but
the remover's, whose stored book stayed behind until the room's next op.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from crosstalk.actors.memory_sync_api import MemorySyncInput, WatchOwn
from crosstalk.actors.router import RouterInput, WatchSent
from crosstalk.features.memory.handle import MemoryFeature
from crosstalk.store.db import open_store
from crosstalk.wire.memory import FactAdd
from crosstalk.wire.room_ops import MemoryEnvelope, Rekey
from tests.store.test_memory_store import ANA, BEN, ROOM, room_db, sent


def _feature(store: object, router: trio.MemorySendChannel[RouterInput]) -> MemoryFeature:
    daemon = SimpleNamespace(store=store, keys=ANA, identity=SimpleNamespace(label="ana"),
                             router=router)
    return MemoryFeature(daemon)  # type: ignore[arg-type]


async def test_our_rekey_is_watched_once_queued_and_nothing_else_is() -> None:
    """The sent listener asks the memory-sync actor to watch our rekey (to apply it at its seq
    when sequenced); a message or a memory op of ours is left to the write that sent it."""
    router_send, _ = trio.open_memory_channel[RouterInput](4)
    feature = _feature(None, router_send)
    sync_send, sync = trio.open_memory_channel[MemorySyncInput](4)
    feature._sync = sync_send
    await feature.on_sent(ROOM, "rekey-1", Rekey(1, BEN.fingerprint, {}))
    await feature.on_sent(ROOM, "fact-1", MemoryEnvelope(FactAdd("f1", "x"), at=1.0, label="a"))
    assert sync.receive_nowait() == WatchOwn(ROOM, "rekey-1")
    with pytest.raises(trio.WouldBlock):
        sync.receive_nowait()


async def test_a_post_sequenced_before_the_watch_is_taken_is_not_waited_for(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The rekey was sequenced (outbox 'sent') before the router took the watch, so no word of
    it will come: waiting returns at once, and the watcher goes on to apply it."""
    conn = room_db(tmp_path / "state.db")
    sent(conn, 3, None, "rekey-1")
    conn.execute("COMMIT")
    conn.close()
    router_send, router = trio.open_memory_channel[RouterInput](4)
    async with open_store(tmp_path / "state.db") as store:
        feature = _feature(store, router_send)
        with trio.fail_after(1):
            assert await feature._wait_sent("rekey-1") is True
        assert isinstance(router.receive_nowait(), WatchSent)
        with trio.fail_after(1):  # not in the outbox: refused, nothing to wait for
            assert await feature._wait_sent("never-queued") is False
