"""Scenario 11: two peers behind separate NATs. Each lives in its own network namespace that can
reach the relay's address and nothing else: ana's and ben's namespaces have no path to each other.
They pair and exchange messages through the relay, and neither listens on a non-loopback address.

Topology (needs root and iproute2; otherwise skipped, saying why):

    ns a (10.231.1.2) --veth-- (10.231.1.1) ns relay, relay on 10.231.0.1 (10.231.2.1)
                                                            --veth-- (10.231.2.2) ns b

The relay's namespace does not forward (``ip_forward=0``), so a packet from a to b goes nowhere.
Everything lives in private namespaces on private addresses: nothing is reachable from outside.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.e2e.conftest import pair, read_json_line
from tests.resilience.harness import Peer, Tally, drain_reads

RELAY_ADDRESS = "10.231.0.1"


@attrs.frozen
class Namespaces:
    relay: str
    ana: str
    ben: str


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def _build(tag: str) -> Namespaces:
    ns = Namespaces(f"ct{tag}r", f"ct{tag}a", f"ct{tag}b")
    for name in (ns.relay, ns.ana, ns.ben):
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")
    _ip("-n", ns.relay, "addr", "add", f"{RELAY_ADDRESS}/32", "dev", "lo")
    subprocess.run(["ip", "netns", "exec", ns.relay, "sysctl", "-qw", "net.ipv4.ip_forward=0"],
                   check=True, capture_output=True, timeout=30)
    for side, name, net in (("a", ns.ana, 1), ("b", ns.ben, 2)):
        outer, inner = f"ct{tag}{side}0", f"ct{tag}{side}1"
        _ip("link", "add", outer, "netns", ns.relay, "type", "veth", "peer", "name", inner,
            "netns", name)
        _ip("-n", ns.relay, "addr", "add", f"10.231.{net}.1/24", "dev", outer)
        _ip("-n", name, "addr", "add", f"10.231.{net}.2/24", "dev", inner)
        _ip("-n", ns.relay, "link", "set", outer, "up")
        _ip("-n", name, "link", "set", inner, "up")
        _ip("-n", name, "route", "add", f"{RELAY_ADDRESS}/32", "via", f"10.231.{net}.1")
    return ns


def _tear_down(ns: Namespaces) -> None:
    for name in (ns.relay, ns.ana, ns.ben):
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30, check=False)


@pytest.fixture
def namespaces() -> Iterator[Namespaces]:
    """Three network namespaces wired as above; skipped (with the reason) where we cannot."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("network namespaces need iproute2 (`apt-get install -y iproute2`)")
    ns = Namespaces(f"ct{os.getpid() % 100000}r", "", "")
    try:
        ns = _build(str(os.getpid() % 100000))
    except (subprocess.CalledProcessError, OSError) as exc:
        _tear_down(ns)
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"cannot build network namespaces here: {detail}")
    try:
        yield ns
    finally:
        _tear_down(ns)


class NsPeer(Peer):
    """A peer whose CLI (and so its daemon) runs inside one network namespace."""

    def __init__(self, home: Path, relay: str, namespace: str) -> None:
        super().__init__(home, relay)
        self.namespace = namespace

    def _command(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespace, sys.executable, "-m", "crosstalk", *args,
                "--home", str(self.home)]

    def _full_env(self) -> dict[str, str]:
        env = {**os.environ, "CROSSTALK_RELAY": self.relay, **self._env()}
        env.pop("CROSSTALK_HOME", None)
        return env

    def run(
        self, *args: str, timeout: float = 60.0, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self._command(*args), capture_output=True, text=True,
                              timeout=timeout, env={**self._full_env(), **(env or {})},
                              check=False, **kw)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self._command(*args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self._full_env())

    def listening(self) -> list[str]:
        return _listening(self.namespace)

    def can_reach(self, address: str, port: int) -> bool:
        probe = ("import socket,sys\ntry:\n"
                 " socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)\n"
                 "except OSError:\n sys.exit(1)\n")
        done = subprocess.run(["ip", "netns", "exec", self.namespace, sys.executable, "-c", probe,
                               address, str(port)], capture_output=True, timeout=30, check=False)
        return done.returncode == 0


def _listening(namespace: str) -> list[str]:
    """Every listening TCP socket and bound UDP socket in a namespace (``/proc/net`` lines)."""
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6"):
        text = subprocess.run(["ip", "netns", "exec", namespace, "cat", f"/proc/net/{table}"],
                              capture_output=True, text=True, timeout=30, check=True).stdout
        for line in text.splitlines()[1:]:
            fields = line.split()
            if table.startswith("udp") or fields[3] == "0A":  # 0A = LISTEN
                found.append(f"{table} {fields[1]}")
    return found


def _loopback(entry: str) -> bool:
    """Whether a /proc/net address (``0100007F:1F90`` or the IPv6 form) is on loopback."""
    address = entry.split()[1].split(":")[0]
    return address.endswith("7F") or address == "00000000000000000000000001000000"


def test_two_peers_behind_separate_nats_pair_and_talk_through_the_relay(
    namespaces: Namespaces, short_tmp: Path, tally: Tally
) -> None:
    """ana and ben cannot reach each other, only the relay: they pair, talk, and listen on
    loopback at most."""
    relay = subprocess.Popen(
        ["ip", "netns", "exec", namespaces.relay, sys.executable, "-m", "crosstalk", "relay",
         "serve", "--host", RELAY_ADDRESS, "--port", "0", "--data", str(short_tmp / "relay-data"),
         "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    peers: list[NsPeer] = []
    try:
        port = int(str(read_json_line(relay, timeout=60)["listening"]).rsplit(":", 1)[1])
        url = f"ws://{RELAY_ADDRESS}:{port}"
        ana = NsPeer(short_tmp / "ana", url, namespaces.ana)
        ben = NsPeer(short_tmp / "ben", url, namespaces.ben)
        peers.extend([ana, ben])
        assert ana.can_reach(RELAY_ADDRESS, port) and ben.can_reach(RELAY_ADDRESS, port)
        assert not ana.can_reach("10.231.2.2", port) and not ben.can_reach("10.231.1.2", port)
        pair(ana, ben)
        for n in range(10):
            tally.send(ana, ben, f"over the NAT {n}")
            tally.send(ben, ana, f"back over the NAT {n}")
        tally.wait_delivered(ana, ben, timeout=60)
        drain_reads(tally, ana, ben)
        tally.record_restarts(ana, ben)
        sockets = {p.name: p.listening() for p in (ana, ben)}
        assert _listening(namespaces.relay), "the relay's listener shows (the probe works)"
        tally.notes["listening"] = sockets
        for name, found in sockets.items():
            assert all(_loopback(entry) for entry in found), (name, found)
        tally.assert_clean()
    finally:
        for peer in peers:
            peer.stop_daemon()
        if relay.poll() is None:
            relay.terminate()
        relay.wait(timeout=15)
        for stream in (relay.stdout, relay.stderr):
            if stream:
                stream.close()
