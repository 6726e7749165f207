"""A pairing in progress survives the relay: real daemons pair across a ``kill -9`` of a single
SQLite relay, and across a ``kill -9`` of the leading node of a two-node NATS cluster.

The inviter's ``room new`` opens the slot and writes its first pairing message; the test waits
until that is stored, kills the relay, and only then does the joiner run ``room join`` with the
right words, against the restarted relay or the surviving node. Every wait is bounded and every
process is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from crosstalk.core.invite import Invite
from crosstalk.wire import relay as w
from crosstalk.wire.pairing import Purpose
from relay.nats_store import NatsStorage
from tests.e2e.conftest import read_json_line, short_tmp, wait_until  # noqa: F401  # a fixture
from tests.relay.client import Identity, open_client
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.process import RelayProcess
from tests.relay.test_nats_cluster import retry
from tests.resilience.conftest import Relay, crowd  # noqa: F401  # crowd is a fixture
from tests.resilience.harness import Peer, ProxyProcess

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def inviting(ana: Peer) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """ana's ``room new`` in the background and its invite line; the process is always reaped."""
    new = ana.spawn("room", "new", "--json", "--label", ana.name)
    try:
        yield new, read_json_line(new, timeout=60)
    finally:
        if new.poll() is None:
            new.kill()
        new.wait(timeout=10)
        for stream in (new.stdout, new.stderr):
            if stream:
                stream.close()


def finish(new: subprocess.Popen[str], joined: dict[str, Any]) -> None:
    """The inviter's pairing completes too, into the same room as the joiner's."""
    made = read_json_line(new, timeout=120)
    assert new.wait(timeout=30) == 0
    assert made["room"] == joined["room"]
    assert (made["them"], joined["them"]) == (joined["you"], made["you"])


def sqlite_owner_parts(db: Path, slot: str) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=5)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM slot_parts WHERE number = ? AND side = 'owner'", (slot,)
        ).fetchone()
    return int(row[0])


def test_pairing_completes_across_a_kill_9_of_the_sqlite_relay(
    short_tmp: Path, crowd: list[Peer]  # noqa: F811
) -> None:
    """ana opens a slot, the relay is killed and restarted, ben joins with the right words."""
    relay = Relay(short_tmp)
    try:
        ana = Peer(short_tmp / "ana", relay.url)
        ben = Peer(short_tmp / "ben", relay.url)
        crowd.extend([ana, ben])
        with inviting(ana) as (new, invite):
            slot = Invite.parse(invite["invite"], purpose=Purpose.ROOM).slot
            db = short_tmp / "relay-data" / "relay.db"
            wait_until(lambda: sqlite_owner_parts(db, slot) >= 1, timeout=60,
                       what="ana's first pairing message in the relay's database")
            relay.kill(signal.SIGKILL)
            relay.start()
            joined = ben.json("room", "join", invite["invite"], "--label", ben.name, timeout=120)
            finish(new, joined)
        assert relay.restarts == 1
    finally:
        relay.kill(signal.SIGTERM)


@pytest.fixture
def nats_pair(short_tmp: Path) -> Iterator[tuple[NatsServer, RelayProcess, RelayProcess]]:  # noqa: F811
    """A nats-server and two relay nodes sharing one key; all stopped by pid."""
    with contextlib.contextmanager(running_nats)(short_tmp / "nats") as server:
        one = RelayProcess(short_tmp / "n1", short_tmp / "n1.stderr", "--nats", server.url)
        two = RelayProcess(short_tmp / "n2", short_tmp / "n2.stderr", "--nats", server.url)
        one.start()
        try:
            (short_tmp / "n2").mkdir(mode=0o700)
            shutil.copy2(short_tmp / "n1" / "relay.key", short_tmp / "n2" / "relay.key")
            two.start()
            try:
                yield server, one, two
            finally:
                two.kill(signal.SIGTERM)
        finally:
            one.kill(signal.SIGTERM)


def nats_owner_parts(url: str, slot: str) -> int:
    """What any other node would load: the slot's parts from ana's side."""
    store = NatsStorage(url, timeout=5.0)
    try:
        slots = store.load().slots
    finally:
        store.close()
    return sum(1 for s in slots if s.number == slot for p in s.parts if p.side == "owner")


async def wait_serving(port: int) -> None:
    """Until the node answers a request."""

    async def attempt() -> w.RelayFrame | None:
        async with open_client(port, Identity()) as client:
            return await client.ok(w.ListRooms(client.next_req()))

    await retry(attempt, within=60)


def test_pairing_completes_through_node_2_after_kill_9_of_node_1(
    short_tmp: Path, nats_pair: tuple[NatsServer, RelayProcess, RelayProcess],  # noqa: F811
    crowd: list[Peer],  # noqa: F811
) -> None:
    """ana opens a slot through node 1, node 1 dies, ben joins through node 2."""
    server, one, two = nats_pair
    balancer = ProxyProcess(one.port, short_tmp / "lb.proxy")
    try:
        ana = Peer(short_tmp / "ana", balancer.url)
        ben = Peer(short_tmp / "ben", f"ws://127.0.0.1:{two.port}")
        crowd.extend([ana, ben])
        with inviting(ana) as (new, invite):
            slot = Invite.parse(invite["invite"], purpose=Purpose.ROOM).slot
            wait_until(lambda: nats_owner_parts(server.url, slot) >= 1, timeout=60,
                       what="ana's first pairing message in JetStream")
            one.kill(signal.SIGKILL)
            balancer.command(f"reset target 127.0.0.1:{two.port}")
            trio.run(wait_serving, two.port)
            joined = ben.json("room", "join", invite["invite"], "--label", ben.name, timeout=120)
            finish(new, joined)
    finally:
        balancer.stop()
