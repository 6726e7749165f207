"""Helpers shared by the side-by-side benchmarks: percentiles, RSS, processes stopped by pid,
and the raw trio-websocket echo round trip that is the ceiling for anything over our relay.

Every benchmark module prints one JSON object with ``--json``; ``python -m bench`` collects them.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import trio
from trio_websocket import WebSocketConnection

from tests.relay.client import open_ws

ECHO_BODY = "x" * 200
# Every load client connects from loopback: lift the relay's per-address and per-identity
# connection caps, which a bench would otherwise run into (it measures the relay, not them).
MANY = ("--max-connections-per-address", "100000", "--max-connections-per-identity", "100000",
        "--max-connections", "100000", "--slot-work-bits", "0", "--slot-rate", "1000000")


def compile_bytecode() -> None:
    """Write the bytecode of ``crosstalk`` and ``relay`` beside their sources, as installing them
    does, before any process is timed.

    An installed package comes with its ``.pyc`` files (pip writes them). A source tree run
    with ``PYTHONDONTWRITEBYTECODE=1`` (as this machine's shell sets it) has only those someone
    compiled, so every process the benchmark starts would compile the rest from source again:
    about 340 ms of CPU in a daemon's start on this two-core box, measured interleaved. Files
    already compiled and unchanged are skipped.
    """
    import compileall

    root = Path(__file__).resolve().parent.parent
    for package in ("crosstalk", "relay"):
        compileall.compile_dir(root / package, quiet=1)


def progress(text: str) -> None:
    """One progress line on stderr; ``python -m bench`` shows it with the elapsed time."""
    print(f"progress: {text}", file=sys.stderr, flush=True)


async def close_all(sockets: Iterable[WebSocketConnection]) -> None:
    """Close many websockets at once, before the tasks that hold them are cancelled.

    Cancelling first costs 2 s per teardown: ``tests.relay.client.open_ws`` then closes with a
    2 s bound, waiting for the peer's close reply, which its cancelled reader task never reads.
    Tasks still using a socket closed here meet ``ConnectionClosed`` and must expect it; the
    task that opened it must keep it open (``trio.sleep_forever``) until cancelled, since
    leaving ``open_ws`` cancels the reader task that the close waits on.
    """
    with trio.move_on_after(5):
        async with trio.open_nursery() as nursery:
            for ws in sockets:
                nursery.start_soon(ws.aclose)


def percentile(samples: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``samples`` by nearest rank."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary_ms(samples: list[float]) -> dict[str, float]:
    """p50/p99/min/max in milliseconds of samples given in seconds, plus the count."""
    return {
        "n": float(len(samples)),
        "p50_ms": round(percentile(samples, 0.50) * 1000, 3),
        "p99_ms": round(percentile(samples, 0.99) * 1000, 3),
        "min_ms": round(min(samples) * 1000, 3),
        "max_ms": round(max(samples) * 1000, 3),
    }


def rss_kib(pid: int) -> int:
    """Resident set size of a live process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a live process (all its threads), from /proc; of this process
    when ``pid`` is None."""
    if pid is None:
        times = os.times()
        return times.user + times.system
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def stop_process(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    """SIGTERM by pid, then SIGKILL after a bound; always reaped."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def start_echo_server() -> tuple[subprocess.Popen[str], int]:
    """The raw trio-websocket echo server of ``bench.relay_throughput`` in its own process."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.relay_throughput", "--echo-server"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        stop_process(proc)
        raise RuntimeError("the echo server did not start")
    return proc, int(json.loads(line)["port"])


async def _echo_round_trips(port: int, count: int) -> list[float]:
    samples = []
    with trio.fail_after(120):
        async with open_ws(port) as ws:
            for _ in range(count):
                start = time.perf_counter()
                await ws.send_message(ECHO_BODY)
                await ws.get_message()
                samples.append(time.perf_counter() - start)
    return samples


def echo_round_trips(count: int) -> list[float]:
    """``count`` sequential 200-byte round trips to a raw trio-websocket echo on loopback (s)."""
    proc, port = start_echo_server()
    try:
        return trio.run(_echo_round_trips, port, count)
    finally:
        stop_process(proc)


def commit_times(directory: Path, count: int) -> list[float]:
    """Seconds per WAL commit of one 200-byte row with ``synchronous=FULL`` in ``directory``, as
    the store commits: a commit writes and syncs the WAL, more than one bare fsync."""
    path = directory / "commit-probe.db"
    conn = sqlite3.connect(path, isolation_level=None)
    samples = []
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("CREATE TABLE t (body BLOB)")
        for _ in range(count):
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 200,))
            conn.execute("COMMIT")
            samples.append(time.perf_counter() - start)
    finally:
        conn.close()
        for leftover in directory.glob("commit-probe.db*"):
            leftover.unlink()
    return samples
