"""Fixtures for the resilience scenarios: a relay that can be killed and restarted on its port,
a fault proxy per person, paired people, and a summary of every scenario's figures."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from relay.main import RELAY_PING_ENV
from tests.e2e.conftest import pair, short_tmp  # noqa: F401  # short_tmp is a fixture we reuse
from tests.relay.process import RelayProcess
from tests.resilience.harness import HEARTBEAT, Peer, ProxyProcess, Tally

FIGURES = pytest.StashKey[list[dict[str, Any]]]()


class Relay:
    """One relay on one data directory and one port, across kills and restarts."""

    def __init__(self, root: Path, *, ping: float | None = None) -> None:
        """``ping``: the relay's ping interval and timeout (``CROSSTALK_RELAY_PING``), else 20 s."""
        self.root = root
        self.env = {} if ping is None else {RELAY_PING_ENV: str(ping)}
        self.proc = RelayProcess(root / "relay-data", root / "relay.stderr", env=self.env)
        self.proc.start()
        self.port = self.proc.port
        self.url = f"ws://127.0.0.1:{self.port}"
        self.restarts = 0

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.proc.kill(sig)

    def start(self) -> None:
        """Start again on the same data directory and port (the relay keeps its key)."""
        self.proc = RelayProcess(
            self.root / "relay-data", self.root / "relay.stderr", "--port", str(self.port),
            env=self.env,
        )
        self.proc.start(timeout=60.0)  # generous: a loaded CI machine starts Python slowly
        self.restarts += 1


@pytest.fixture
def relay(short_tmp: Path) -> Iterator[Relay]:  # noqa: F811  # the imported fixture
    """A real relay process, stopped by pid afterwards."""
    running = Relay(short_tmp)
    yield running
    running.kill(signal.SIGTERM)


@pytest.fixture
def proxies(short_tmp: Path, relay: Relay) -> Iterator[Callable[[str], ProxyProcess]]:  # noqa: F811
    """``make(name)`` starts a fault proxy in front of the relay; all stopped by pid."""
    started: list[ProxyProcess] = []

    def make(name: str) -> ProxyProcess:
        proxy = ProxyProcess(relay.port, short_tmp / f"{name}.proxy")
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def crowd(short_tmp: Path) -> Iterator[list[Peer]]:  # noqa: F811
    """Peers created by tests (append to it); their daemons are stopped by pid afterwards."""
    peers: list[Peer] = []
    yield peers
    for peer in peers:
        peer.stop_daemon()


@pytest.fixture
def tally(request: pytest.FixtureRequest) -> Iterator[Tally]:
    """The scenario's figures; printed and collected for the end-of-run summary."""
    counts = Tally(request.node.name)
    yield counts
    figures = counts.figures()
    request.config.stash.setdefault(FIGURES, []).append(figures)
    print("resilience figures:", json.dumps(figures, sort_keys=True))


def paired(
    short_tmp: Path, ana_url: str, ben_url: str, crowd: list[Peer],  # noqa: F811
    *, heartbeat: float = HEARTBEAT,
) -> tuple[Peer, Peer]:
    """ana and ben, each on their own relay URL (direct or through a proxy), paired."""
    ana = Peer(short_tmp / "ana", ana_url, heartbeat=heartbeat)
    ben = Peer(short_tmp / "ben", ben_url, heartbeat=heartbeat)
    crowd.extend([ana, ben])
    pair(ana, ben)
    return ana, ben


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One JSON line of figures per scenario that ran (docs/resilience.md quotes them)."""
    figures = config.stash.get(FIGURES, [])
    if figures:
        terminalreporter.section("resilience figures")
        for row in figures:
            terminalreporter.write_line(json.dumps(row, sort_keys=True))
