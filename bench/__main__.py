"""One command for every benchmark, side by side: ``python -m bench [--quick] [--out DIR]``.

Runs each benchmark in its own process (one after another, so they never compete for the two
cores; ``--quick`` runs a few at once, since its figures mean nothing), collects the JSON each
prints, and writes ``DIR/performance.md`` with tables and
``DIR/performance/*.png`` plots, plus the raw figures in ``DIR/performance/results.json``.
``DIR`` defaults to ``docs/``. ``--quick`` runs every benchmark at smoke size (CI uses it, with
``--out`` pointing at a temporary directory). A benchmark that fails is reported in the page
with the end of its error output, and the command exits 1 after writing the page.
``--only NAME...`` re-measures those benchmarks into the existing ``results.json``, keeping the
others' figures and the full run's load; each re-measured run keeps its own load and date, which
the page shows. Progress (which benchmark, what it is doing, time since the start) goes to
stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import report
from bench.peers import NATS_APT, nats_server_path

ROOT = Path(__file__).resolve().parents[1]
#: Seconds of silence from a benchmark after which we say it is still running.
HEARTBEAT = 30.0
#: Benchmarks a quick run runs at once (a full run: one at a time).
QUICK_WORKERS = 3
#: The quick run starts these first, so that none of them is left running alone at the end.
SLOWEST = ("scaling", "latency", "hook")


def plan(quick: bool) -> list[tuple[str, list[str]]]:
    """(name, arguments after ``python -m``) for every benchmark, in running order."""
    q = ["--quick"] if quick else []
    return [
        ("daemon", ["bench.daemon", *q]),
        ("latency", ["bench.latency", "--json", *q]),
        ("peers", ["bench.peers", "--json", *q]),
        ("relay_throughput",
         ["bench.relay_throughput", "--seconds", "0.2" if quick else "3", *q]),
        ("pairing", ["bench.pairing", "--json", "--rounds", "2" if quick else "50"]),
        ("catchup", ["bench.catchup", "--json",
                     *(["--ops", "100", "--facts", "100"] if quick else [])]),
        ("hook", ["bench.hook", "--json", *(q or ["--runs", "20"])]),
        ("scaling", ["bench.scaling", "--json", *q]),
        *others(quick),
    ]


NEEDS_NATS = {"nats_relay"}  # benchmarks that cannot run at all without the nats-server binary

KNOWN = {"daemon", "latency", "peers", "relay_throughput", "pairing", "catchup", "hook",
         "scaling", "scaling_members",  # the first is the second's and two more curves
         "report", "plots", "notice", "push",
         "two_trees"}  # run by hand: it needs a second source tree (--base)


def others(quick: bool) -> list[tuple[str, list[str]]]:
    """Benchmarks added to bench/ later (hook, MCP, ...): run with ``--json`` (and ``--quick``
    when the module mentions it) and shown as a plain table until the page learns them."""
    found = []
    for path in sorted(Path(__file__).parent.glob("[a-z]*.py")):
        if path.stem in KNOWN:
            continue
        source = path.read_text()
        if '"--json"' not in source:
            continue
        quick_flag = ["--quick"] if quick and '"--quick"' in source else []
        found.append((path.stem, [f"bench.{path.stem}", "--json", *quick_flag]))
    return found


def _first_json(text: str) -> Any:
    """The first JSON value in ``text`` (``bench.daemon`` prints a table after it)."""
    start = min(i for i in (text.find("{"), text.find("[")) if i >= 0)
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


class Progress:
    """Progress lines on stderr, each with the time since the run started."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.lock = threading.Lock()

    def say(self, text: str) -> None:
        with self.lock:
            print(f"bench [{time.monotonic() - self.started:6.1f} s] {text}", file=sys.stderr,
                  flush=True)


def run_one(name: str, args: list[str], timeout: float, progress: Progress) -> dict[str, Any]:
    """Run one benchmark module; its JSON, or ``{"error": ...}`` with the end of its stderr.

    Its ``progress:`` lines are passed on as they come, and every :data:`HEARTBEAT` seconds we
    say it is still running, so a long benchmark is never silent.
    """
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    assert proc.stdout is not None and proc.stderr is not None
    errors: list[str] = []
    output: list[str] = []
    stdout, stderr = proc.stdout, proc.stderr

    def pump_stderr() -> None:
        for line in stderr:
            errors.append(line)
            if line.startswith("progress: "):
                progress.say(f"  {name}: {line.removeprefix('progress: ').rstrip()}")

    readers = [threading.Thread(target=pump_stderr, daemon=True),
               threading.Thread(target=lambda: output.append(stdout.read()), daemon=True)]
    for reader in readers:
        reader.start()
    while proc.poll() is None:
        try:
            proc.wait(timeout=HEARTBEAT)
        except subprocess.TimeoutExpired:
            if time.monotonic() - started > timeout:
                proc.kill()
                proc.wait()
                return {"error": f"did not finish within {timeout:.0f} s"}
            progress.say(f"  {name}: still running")
    for reader in readers:
        reader.join(timeout=10)
    wall = round(time.monotonic() - started, 1)
    if proc.returncode != 0:
        return {"error": "".join(errors).strip()[-4000:] or f"exit {proc.returncode}",
                "wall_s": wall}
    try:
        return {"result": _first_json("".join(output)), "wall_s": wall}
    except (ValueError, json.JSONDecodeError):
        return {"error": f"printed no JSON: {''.join(output)[-500:]!r}", "wall_s": wall}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    mem = Path("/proc/meminfo").read_text().split("\n", 1)[0].split()[1]
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(int(mem) / 1024 / 1024),
        "python": platform.python_version(),
        "system": platform.system(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def write(results: dict[str, Any], out: Path) -> None:
    """``out/performance.md``, its plots and ``results.json`` under ``out/performance/``."""
    figures = out / "performance"
    figures.mkdir(parents=True, exist_ok=True)
    (figures / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "performance.md").write_text(report.render(results, figures))


def main() -> None:
    """Parse arguments, run every benchmark, write the page and the plots."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke sizes: every path, briefly")
    parser.add_argument("--out", type=Path, default=ROOT / "docs",
                        help="directory for performance.md and performance/ (default: docs/)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these benchmarks")
    parser.add_argument("--from-results", type=Path, default=None,
                        help="measure nothing: render the page again from a results.json")
    args = parser.parse_args()
    if args.from_results is not None:
        write(json.loads(args.from_results.read_text()), args.out)
        return
    previous = args.out / "performance" / "results.json"
    if args.only is not None and previous.exists():
        results = merge_alone(json.loads(previous.read_text()), run_chosen(args))
    else:
        results = {"quick": args.quick, "machine": machine(), "load_before": _load()}
        progress = Progress()
        results["runs"] = run_all(_chosen(args), args.quick, progress)
        results["wall_s"] = round(time.monotonic() - progress.started, 1)
        results["load_after"] = _load()  # other work compresses every ratio
    write(results, args.out)
    print(f"bench: wrote {args.out / 'performance.md'}", file=sys.stderr)
    if any("error" in r for r in results["runs"].values()):
        sys.exit(1)


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def _chosen(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    return [(name, command) for name, command in plan(args.quick)
            if args.only is None or name in args.only]


def run_chosen(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The ``--only`` benchmarks' outcomes (each with the load and the date it ran at)."""
    return run_all(_chosen(args), args.quick, Progress())


def merge_alone(previous: dict[str, Any], alone: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``previous`` with the runs re-measured by ``--only`` in place of theirs, each marked as
    measured apart (with its own load and date): the page's load and date stay the full run's,
    which the other figures come from."""
    merged = {**previous, "runs": {**previous["runs"]}}
    for name, outcome in alone.items():
        merged["runs"][name] = {**outcome, "alone": True}
    return merged


def run_all(chosen: list[tuple[str, list[str]]], quick: bool,
            progress: Progress) -> dict[str, dict[str, Any]]:
    """Every chosen benchmark's outcome, in plan order.

    A full run measures one benchmark at a time, so they never compete for the two cores. A
    quick run only proves every path still works (its figures mean nothing), so it runs
    :data:`QUICK_WORKERS` at once to stay within a few seconds.
    """

    def one(name: str, command: list[str]) -> dict[str, Any]:
        if name in NEEDS_NATS and nats_server_path() is None:
            return {"skipped": f"nats-server is not installed ({NATS_APT})"}
        progress.say(f"{name} …")
        before = _load()
        outcome = run_one(name, command, 300 if quick else 900, progress)
        # Its own load and date: what the page says of a benchmark re-measured with --only.
        outcome.update(load_before=before, load_after=_load(), date=machine()["date"])
        state = "FAILED" if "error" in outcome else "done"
        progress.say(f"{name} {state} in {outcome.get('wall_s', '?')} s")
        return outcome

    order = sorted(chosen, key=lambda item: item[0] not in SLOWEST) if quick else chosen
    with ThreadPoolExecutor(max_workers=QUICK_WORKERS if quick else 1) as pool:
        futures = {name: pool.submit(one, name, command) for name, command in order}
        return {name: futures[name].result() for name, _ in chosen}


if __name__ == "__main__":
    main()
