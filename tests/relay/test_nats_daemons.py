"""Real daemons on a two-node relay cluster: pairing, messages and room memory across nodes,
and kill -9 of the node one of them uses, with a fault proxy standing in for the load balancer."""

from __future__ import annotations

import contextlib
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import short_tmp, wait_until  # noqa: F401  # short_tmp is a fixture
from tests.relay.nats_process import running_nats
from tests.relay.process import RelayProcess
from tests.resilience.conftest import crowd, paired  # noqa: F401  # crowd is a fixture
from tests.resilience.harness import Peer, ProxyProcess, Tally, drain_reads

pytestmark = pytest.mark.e2e

MESSAGES = 40


@pytest.fixture
def cluster(short_tmp: Path) -> Iterator[tuple[RelayProcess, RelayProcess]]:  # noqa: F811
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
                yield one, two
            finally:
                two.kill(signal.SIGTERM)
        finally:
            one.kill(signal.SIGTERM)


@pytest.fixture
def balancer(short_tmp: Path, cluster: tuple[RelayProcess, RelayProcess]  # noqa: F811
             ) -> Iterator[ProxyProcess]:
    """A TCP proxy in front of node 1 (it can be pointed at node 2 later)."""
    proxy = ProxyProcess(cluster[0].port, short_tmp / "lb.proxy")
    try:
        yield proxy
    finally:
        proxy.stop()


def facts(peer: Peer) -> list[dict[str, Any]]:
    return list(peer.json("facts")["facts"])


def test_daemons_on_different_nodes_pair_talk_and_share_memory(
    short_tmp: Path, cluster: tuple[RelayProcess, RelayProcess],  # noqa: F811
    crowd: list[Peer],  # noqa: F811
) -> None:
    """ana on node 1 and ben on node 2 pair, exchange messages, and see each other's facts."""
    one, two = cluster
    ana, ben = paired(short_tmp, f"ws://127.0.0.1:{one.port}", f"ws://127.0.0.1:{two.port}",
                      crowd)
    tally = Tally("cross-node")
    for n in range(6):
        sender, receiver = (ana, ben) if n % 2 == 0 else (ben, ana)
        assert tally.send(sender, receiver, f"message {n}") is not None
    tally.wait_delivered(ana, ben, timeout=60)
    drain_reads(tally, ana, ben)
    tally.assert_clean()
    ana.json("facts", "add", "deploys happen on tuesdays", "--in", "ops")
    wait_until(lambda: len(facts(ben)) == 1, timeout=30, what="ana's fact at ben's")
    assert facts(ben)[0]["text"] == "deploys happen on tuesdays"


def test_kill_9_of_a_node_loses_and_repeats_nothing_at_the_agent(
    short_tmp: Path, cluster: tuple[RelayProcess, RelayProcess],  # noqa: F811
    balancer: ProxyProcess, crowd: list[Peer],  # noqa: F811
) -> None:
    """Node 1 (ana's) dies mid-exchange; she comes back through node 2."""
    one, two = cluster
    ana, ben = paired(short_tmp, balancer.url, f"ws://127.0.0.1:{two.port}", crowd)
    tally = Tally("cross-node kill")
    for n in range(MESSAGES):
        if n == MESSAGES // 2:
            one.kill(signal.SIGKILL)
            balancer.command(f"reset target 127.0.0.1:{two.port}")
        sender, receiver = (ana, ben) if n % 2 == 0 else (ben, ana)
        tally.send(sender, receiver, f"message {n}")
        if n % 5 == 0:
            tally.read(receiver)
    tally.wait_delivered(ana, ben, timeout=120)
    drain_reads(tally, ana, ben)
    print("cluster kill figures:", tally.figures())
    tally.assert_clean()
    assert tally.delivered >= MESSAGES // 2
