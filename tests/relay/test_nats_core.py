"""The whole relay-core suite again, with every World's storage on NATS JetStream.

The core tests build their storage through ``tests.relay.harness.MemoryStorage`` (and
``test_core_log.MemoryStorage`` and ``test_core_slot_durability.MemoryStorage`` for the restart
tests); here those names make a fresh
:class:`~relay.nats_store.NatsStorage` namespace instead, so the same assertions (including
``world.storage.load()`` after deletes, prunes and restarts) run against a real nats-server.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import tests.relay.harness as harness
import tests.relay.test_core_log as core_log
import tests.relay.test_core_slot_durability as slot_durability
from crosstalk.wire import relay as w
from relay.nats_store import NatsStorage
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.test_core_handshake import *  # noqa: F403 - re-run these tests here
from tests.relay.test_core_log import *  # noqa: F403
from tests.relay.test_core_rooms import *  # noqa: F403
from tests.relay.test_core_slot_durability import *  # noqa: F403
from tests.relay.test_core_slots import *  # noqa: F403

_names = itertools.count()


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path_factory.mktemp("nats"))


@pytest.fixture(autouse=True)
def storage_on_nats(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[list[NatsStorage]]:
    """Every storage a core test makes is a NatsStorage in its own namespace."""
    made: list[NatsStorage] = []

    def make(clock: Callable[[], float] = time.time) -> NatsStorage:
        store = NatsStorage(nats_server.url, namespace=f"core{next(_names)}", timeout=5.0,
                            clock=clock)
        made.append(store)
        return store

    monkeypatch.setattr(harness, "MemoryStorage", make)
    monkeypatch.setattr(core_log, "MemoryStorage", make)
    monkeypatch.setattr(slot_durability, "MemoryStorage", make)
    yield made
    for store in made:
        store.close()


def test_core_worlds_here_really_use_nats(storage_on_nats: list[NatsStorage]) -> None:
    """A World built in this module commits to NATS: another client of the namespace sees it."""
    world = harness.World()
    alice = world.login(harness.ALICE, "d1")
    world.ok(alice, w.Create(world.req(), "r1", harness.ALICE.vouch("r1", harness.ALICE)))
    [store] = storage_on_nats
    again = NatsStorage(store.url, namespace=store.namespace)
    try:
        assert [r.room for r in again.load().rooms] == ["r1"]
    finally:
        again.close()
