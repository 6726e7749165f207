"""Worst loop lag while a several-hundred-MB file slice is sent (issue 36 item 4).

A relay and two paired daemons (``bench.latency.TwoDaemons``). In a project directory, a sparse
file of ``--mib`` MiB (400; ``--quick``: 8, still 64 times the 128 KiB cap) is sent from ana to
ben as a ``file:`` slice by the real CLI, ``--sends`` times one after another (5; ``--quick``: 1).
While each send runs, this process asks ana's daemon for ``status`` over the control socket, back
to back. Figures:

* ``worst_loop_lag_ms``: the daemon's own measure (``status``'s ``loop``: the supervisor's pulse
  woken late), the worst of the whole run, after the sends; ``worst_loop_lag_before_ms`` is the
  same before the first send (start-up and pairing), so the sends caused the worst only when it
  is above that. ``lag_resolution_ms`` is the pulse's period: a stall shows at least its length
  minus that period, so stalls shorter than a period may be missed.
* ``status_during_send``: each ``status`` round trip asked while a send ran (p50, p99, max).
* ``send``: each send's wall time, CLI process start included.
* ``truncated``: whether every send answered ``truncated: [0]`` (cut to the 128 KiB cap).

On main before this benchmark existed, one 400 MB slice held the daemon's loop for about 2.5
minutes: the file was read whole and scanned in one regex call per pattern.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import progress, summary_ms
from bench.latency import TwoDaemons
from crosstalk.client import call
from crosstalk.paths import Home
from tests.e2e.conftest import Person

#: Seconds one send may take before the benchmark gives up on it.
SEND_TIMEOUT = 60.0


def _worst_lag(home: Home) -> dict[str, float]:
    loop = call(home, "status", timeout=10.0)["loop"]
    return {"worst_s": float(loop["worst_lag_s"]), "resolution_s": float(loop["resolution_s"])}


def send_while_asking(ana: Person, project: Path) -> tuple[float, list[float], dict[str, Any]]:
    """One CLI send of ``file:big.bin``; status round trips (s) asked meanwhile; its reply."""
    env = {**os.environ, "CROSSTALK_RELAY": ana.relay}
    env.pop("CROSSTALK_HOME", None)
    home = Home(ana.home)
    waits: list[float] = []
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "send", "ben", "the big file", "--slice",
         "file:big.bin", "--json", "--home", str(ana.home)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project,
    )
    try:
        while proc.poll() is None:
            if time.perf_counter() - started > SEND_TIMEOUT:
                raise RuntimeError(f"a send took over {SEND_TIMEOUT:g} s")
            asked = time.perf_counter()
            call(home, "status", timeout=SEND_TIMEOUT)
            waits.append(time.perf_counter() - asked)
        took = time.perf_counter() - started
        out, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    if proc.returncode != 0:
        raise RuntimeError(f"send failed: {out[-500:]} {err[-500:]}")
    reply: dict[str, Any] = json.loads(out.splitlines()[-1])
    return took, waits, reply


def _markdown(result: dict[str, Any]) -> str:
    status = result["status_during_send"]
    return (
        "| figure | value |\n|---|---|\n"
        f"| worst loop lag while a {result['mib']} MiB file slice is sent "
        f"| {result['worst_loop_lag_ms']:.1f} ms (before the sends: "
        f"{result['worst_loop_lag_before_ms']:.1f} ms; resolution "
        f"{result['lag_resolution_ms']:.0f} ms) |\n"
        f"| `status` while it is sent, p50 / p99 / max | {status['p50_ms']:.1f} / "
        f"{status['p99_ms']:.1f} / {status['max_ms']:.1f} ms over {status['n']:.0f} |\n"
        f"| the send, CLI start included, p50 | {result['send']['p50_ms']:.0f} ms "
        f"({result['sends']} send{'s' if result['sends'] != 1 else ''}, each cut to the "
        f"cap: {result['truncated']}) |\n"
    )


def run(quick: bool, mib: int | None = None, sends: int | None = None) -> dict[str, Any]:
    """Measure; return a JSON-ready dict (milliseconds)."""
    size_mib = mib or (8 if quick else 400)
    count = sends or (1 if quick else 5)
    with TwoDaemons() as (ana, _ben):
        project = ana.home.parent / "project"
        project.mkdir()
        with (project / "big.bin").open("wb") as big:
            big.truncate(size_mib * 1024 * 1024)  # sparse: no disk, zeros when read
        home = Home(ana.home)
        before = _worst_lag(home)
        took, waits, cut = [], [], []
        for n in range(count):
            progress(f"send {n + 1}/{count} of a {size_mib} MiB file slice")
            seconds, asked, reply = send_while_asking(ana, project)
            took.append(seconds)
            waits += asked
            cut.append(reply.get("truncated") == [0])
        after = _worst_lag(home)
    result: dict[str, Any] = {
        "mib": size_mib,
        "sends": count,
        "worst_loop_lag_ms": round(after["worst_s"] * 1000, 3),
        "worst_loop_lag_before_ms": round(before["worst_s"] * 1000, 3),
        "lag_resolution_ms": round(after["resolution_s"] * 1000, 3),
        "status_during_send": summary_ms(waits),
        "send": summary_ms(took),
        "truncated": all(cut),
    }
    result["markdown"] = _markdown(result)
    return result


def main() -> None:
    """Parse arguments, measure, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one 8 MiB send, for smoke runs")
    parser.add_argument("--mib", type=int, default=None, help="the file's size in MiB")
    parser.add_argument("--sends", type=int, default=None, help="how many sends")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.quick, args.mib, args.sends)
    if args.json:
        print(json.dumps(result))
        return
    print(result["markdown"])


if __name__ == "__main__":
    main()
