"""Daemon figures: cold start to first `status` reply and to every op served, idle RSS,
control round trip p50/p99.

Each figure sits next to a baseline measured in the same run on the same machine:
- start: a bare `python3 -c 'import json, socket'` (the interpreter's own floor);
- RSS: that same bare interpreter, idle;
- round trip: a minimal standard-library echo server on a unix socket.

The package's bytecode is written first (``bench._common.compile_bytecode``): an installed
daemon has it, and without it each start would compile the modules it imports from source.

Run: ``python3 -m bench.daemon [--quick]``. Prints a JSON object and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._common import compile_bytecode

ECHO_SERVER = r"""
import os, socket, sys
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX); srv.bind(path); srv.listen(1)
print("ready", flush=True)
conn, _ = srv.accept()
buf = b""
while True:
    data = conn.recv(65536)
    if not data:
        break
    buf += data
    while b"\n" in buf:
        line, _, buf = buf.partition(b"\n")
        conn.sendall(b'{"ok": true}\n')
"""


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _round_trips(path: Path, count: int) -> list[float]:
    request = json.dumps({"v": 1, "op": "status"}).encode() + b"\n"
    samples = []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        buf = b""
        for _ in range(count):
            start = time.perf_counter()
            sock.sendall(request)
            while b"\n" not in buf:
                buf += sock.recv(65536)
            _, _, buf = buf.partition(b"\n")
            samples.append(time.perf_counter() - start)
    return samples


def _bare_interpreter_start(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import json, socket"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _daemon_start(home: Path) -> tuple[float, float, int]:
    """Seconds from spawning `daemon run` until its first status reply, and until a status
    reply no longer names parts still starting (every op served); returns (first, ready, pid)."""
    from crosstalk.hook.control import request

    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "daemon", "run", "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    first = 0.0
    while True:
        try:
            reply = request(home / "daemon.sock", "status", timeout=1.0)
            first = first or time.perf_counter() - start
            if not reply.get("starting"):
                return first, time.perf_counter() - start, proc.pid
        except Exception:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise TimeoutError("the daemon did not finish starting within 30 s")
        time.sleep(0.002)


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        if finished:
            return
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def run(quick: bool) -> dict[str, float]:
    repeats = 1 if quick else 5
    round_trips = 200 if quick else 5000
    results: dict[str, float] = {}
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="ctb-", dir="/tmp") as tmp:
        results["bare_interpreter_start_s"] = _bare_interpreter_start(repeats)
        starts, readies = [], []
        for i in range(repeats):
            first, ready, pid = _daemon_start(Path(tmp) / f"h{i}")
            starts.append(first)
            readies.append(ready)
            if i < repeats - 1:
                _stop(pid)
        results["daemon_cold_start_s"] = statistics.median(starts)
        results["daemon_ready_s"] = statistics.median(readies)
        time.sleep(0.2 if quick else 3)  # let start-up garbage settle before reading RSS
        results["daemon_idle_rss_kib"] = _rss_kib(pid)
        samples = _round_trips(Path(tmp) / f"h{repeats - 1}" / "daemon.sock", round_trips)
        _stop(pid)
        results["control_rtt_p50_ms"] = _percentile(samples, 0.50) * 1000
        results["control_rtt_p99_ms"] = _percentile(samples, 0.99) * 1000

        bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        time.sleep(0.3)
        results["bare_interpreter_rss_kib"] = _rss_kib(bare.pid)
        bare.kill()
        bare.wait()

        echo_path = Path(tmp) / "echo.sock"
        echo = subprocess.Popen(
            [sys.executable, "-c", ECHO_SERVER, str(echo_path)], stdout=subprocess.PIPE, text=True
        )
        assert echo.stdout is not None and echo.stdout.readline().strip() == "ready"
        base = _round_trips(echo_path, round_trips)
        echo.kill()
        echo.wait()
        results["echo_rtt_p50_ms"] = _percentile(base, 0.50) * 1000
        results["echo_rtt_p99_ms"] = _percentile(base, 0.99) * 1000
    return results


def table(r: dict[str, float]) -> str:
    rows = [
        (
            "cold start → first status reply",
            f"{r['daemon_cold_start_s'] * 1000:.0f} ms",
            f"bare interpreter {r['bare_interpreter_start_s'] * 1000:.0f} ms",
            f"{r['daemon_cold_start_s'] / r['bare_interpreter_start_s']:.1f}×",
        ),
        (
            "cold start → every op served (status names nothing starting)",
            f"{r['daemon_ready_s'] * 1000:.0f} ms",
            f"bare interpreter {r['bare_interpreter_start_s'] * 1000:.0f} ms",
            f"{r['daemon_ready_s'] / r['bare_interpreter_start_s']:.1f}×",
        ),
        (
            "idle RSS",
            f"{r['daemon_idle_rss_kib'] / 1024:.1f} MiB",
            f"bare interpreter {r['bare_interpreter_rss_kib'] / 1024:.1f} MiB",
            f"{r['daemon_idle_rss_kib'] / r['bare_interpreter_rss_kib']:.1f}×",
        ),
        (
            "control round trip p50",
            f"{r['control_rtt_p50_ms']:.3f} ms",
            f"stdlib echo {r['echo_rtt_p50_ms']:.3f} ms",
            f"{r['control_rtt_p50_ms'] / r['echo_rtt_p50_ms']:.1f}×",
        ),
        (
            "control round trip p99",
            f"{r['control_rtt_p99_ms']:.3f} ms",
            f"stdlib echo {r['echo_rtt_p99_ms']:.3f} ms",
            f"{r['control_rtt_p99_ms'] / r['echo_rtt_p99_ms']:.1f}×",
        ),
    ]
    lines = ["| measure | crosstalk | baseline (same run) | ratio |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few seconds, for CI smoke runs")
    results = run(parser.parse_args().quick)
    print(json.dumps(results, indent=2))
    print(table(results))


if __name__ == "__main__":
    main()
