"""One command for every benchmark, side by side: ``python -m bench [--quick] [--out DIR]``.

Runs each benchmark in its own process (one after another, so they never compete for the two
cores), collects the JSON each prints, and writes ``DIR/performance.md`` with tables and
``DIR/performance/*.png`` plots, plus the raw figures in ``DIR/performance/results.json``.
``DIR`` defaults to ``docs/``. ``--quick`` runs every benchmark at smoke size (CI uses it, with
``--out`` pointing at a temporary directory). A benchmark that fails is reported in the page
with the end of its error output, and the command exits 1 after writing the page.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import report
from bench.peers import NATS_APT, nats_server_path

ROOT = Path(__file__).resolve().parents[1]


def plan(quick: bool) -> list[tuple[str, list[str]]]:
    """(name, arguments after ``python -m``) for every benchmark, in running order."""
    q = ["--quick"] if quick else []
    return [
        ("daemon", ["bench.daemon", *q]),
        ("latency", ["bench.latency", "--json", *q]),
        ("peers", ["bench.peers", "--json", *q]),
        ("relay_throughput",
         ["bench.relay_throughput", "--seconds", "0.5" if quick else "3", *q]),
        ("pairing", ["bench.pairing", "--json", "--rounds", "3" if quick else "50"]),
        ("catchup", ["bench.catchup", "--json",
                     *(["--ops", "200", "--facts", "200"] if quick else [])]),
        ("hook", ["bench.hook", "--json", *(q or ["--runs", "20"])]),
        ("scaling", ["bench.scaling", "--json", *q]),
        *others(quick),
    ]


NEEDS_NATS = {"nats_relay"}  # benchmarks that cannot run at all without the nats-server binary

KNOWN = {"daemon", "latency", "peers", "relay_throughput", "pairing", "catchup", "hook",
         "scaling", "report", "plots"}


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


def run_one(args: list[str], timeout: float) -> dict[str, Any]:
    """Run one benchmark module; its JSON, or ``{"error": ...}`` with the end of its stderr."""
    started = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                              cwd=ROOT, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish within {timeout:.0f} s"}
    wall = round(time.monotonic() - started, 1)
    if done.returncode != 0:
        return {"error": done.stderr.strip()[-4000:] or f"exit {done.returncode}", "wall_s": wall}
    try:
        return {"result": _first_json(done.stdout), "wall_s": wall}
    except (ValueError, json.JSONDecodeError):
        return {"error": f"printed no JSON: {done.stdout[-500:]!r}", "wall_s": wall}


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
    results: dict[str, Any] = {"quick": args.quick, "machine": machine(), "runs": {}}
    previous = args.out / "performance" / "results.json"
    if args.only is not None and previous.exists():  # re-measure some, keep the others' figures
        results["runs"] = json.loads(previous.read_text())["runs"]
    for name, command in plan(args.quick):
        if args.only is not None and name not in args.only:
            continue
        print(f"bench: {name} …", file=sys.stderr, flush=True)
        if name in NEEDS_NATS and nats_server_path() is None:
            results["runs"][name] = {"skipped": f"nats-server is not installed ({NATS_APT})"}
            continue
        outcome = run_one(command, timeout=300 if args.quick else 900)
        results["runs"][name] = outcome
        print(f"bench: {name} {'FAILED' if 'error' in outcome else 'done'} "
              f"({outcome.get('wall_s', '?')} s)", file=sys.stderr, flush=True)
    results["wall_s"] = sum(float(r.get("wall_s", 0)) for r in results["runs"].values())
    write(results, args.out)
    print(f"bench: wrote {args.out / 'performance.md'} in {results['wall_s']} s",
          file=sys.stderr)
    if any("error" in r for r in results["runs"].values()):
        sys.exit(1)


if __name__ == "__main__":
    main()
