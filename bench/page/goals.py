"""The goals of issues 22 (the fast path and the relay) and 41 (speed at the edges) at a glance:
each path, its figure and its yardstick from the same run, the goal, and whether it is met or,
if not, what bounds it (a floor or a CPU budget measured in the same run). Rendered by
bench/report.py; every figure comes from the runs' results, none is typed in. Issue 22's rows are
built here, issue 41's in bench/page/goals41.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.cpu_profile import CRYPTO, OURS, SCHEDULING
from bench.page import goals41
from bench.page.fmt import Result, Row

RELAY_GOALS = {2: 0.6, 20: 0.3}  # 500 clients, 1 in flight: ops ÷ the echo ceiling
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop")
HEAD = ("| issue | path | crosstalk | yardstick, same run | goal | verdict |\n"
        "|---|---|---|---|---|---|")


def relay_need(x: dict[str, Any], goal: float) -> tuple[float, float, float, float]:
    """``(relay µs/op, client µs/op, goal ops/s, cores the goal would take)`` for one relay row,
    from the CPU that row measured."""
    ops = x["ops_per_s"]
    relay_us, client_us = 1e6 * x["relay_cores"] / ops, 1e6 * x["client_cores"] / ops
    target = goal * x["echo_rt_per_s"]
    return relay_us, client_us, target, target * (relay_us + client_us) / 1e6


def goals(runs: dict[str, Any]) -> str:
    """The table, one row per goal; a run that did not complete says so in its rows."""
    rows: list[Row] = []
    for issue, build in _builders():
        try:
            rows.extend([issue, *row] for row in build(_results(runs)))
        except (KeyError, TypeError, ZeroDivisionError, ValueError):
            rows.append([issue, build.__doc__ or build.__name__, "not measured in this run",
                         "—", "—", "—"])
    body = "\n".join("| " + " | ".join(r) + " |" for r in rows)
    return "\n".join([
        "## Issues 22 and 41: the goals at a glance", "",
        HEAD, body, "",
        "Each figure is from the sections below (same run); a goal not met says what bounds it, "
        "measured in this run. The room of 200 is the largest point of the members-per-room "
        "curve (`bench/scaling.py`, in every full run: fake clients at one real relay); the room "
        "of real daemons is `bench/big_room.py`; the pushes are `bench/push.py`, run by "
        "`bench/latency.py` on the daemons that time send → held.", "",
    ])


def _builders() -> tuple[tuple[str, Callable[[Result], list[Row]]], ...]:
    """(issue, builder) in the table's order: a builder gives its rows (the cells after the
    issue's), or raises KeyError (or a like error) when its benchmark did not run, and the
    table says so under its issue."""
    return (
        ("22, 41", _held), ("22", _held_tail), ("41", goals41.held_spread),
        ("41", goals41.pushes), ("22", _hook), ("22", _mcp), ("22", _read),
        ("22", _cold_start), ("22", _relay), ("22", _history), ("41", _catchup),
        ("41", goals41.room_build), ("41", goals41.room_spread), ("41", goals41.real_room),
        ("41", goals41.disk), ("41", goals41.soak),
    )


def _results(runs: dict[str, Any]) -> Result:
    def result(name: str) -> dict[str, Any]:
        value: dict[str, Any] = runs[name]["result"]
        return value
    return result


def _scheduling(timeline: dict[str, Any]) -> str:
    """What the timeline's CPU profile says of the daemons' work, if it was taken."""
    profile = [timeline.get("cpu_profile", {}).get(n) for n in ("sender", "recipient")]
    if not all(profile):
        return ""

    def span(kind: str) -> str:
        shares = [p.get(kind, 0.0) for p in profile if p]
        return f"{min(shares):.0%}-{max(shares):.0%}"

    return (f"; a profile of the two daemons puts {span(SCHEDULING)} of their CPU in trio's "
            f"scheduling (the hand-offs between actors), {span(OURS)} in our actors' own code "
            f"and {span(CRYPTO)} in crypto")


def _held(result: Result) -> list[Row]:
    """send → held, p50"""
    held = result("latency")["send_to_held"]
    crosschat = result("peers")["crosschat"]["latency"]["p50_ms"]
    alone = result("timeline")["alone"]
    floor = alone["ws_echo"]["p50_ms"] + 3 * alone["wal_commit"]["p50_ms"]
    parts = (f"two loopback hops {alone['ws_echo']['p50_ms']:.2f} ms + three "
             f"`synchronous=FULL` WAL commits of {alone['wal_commit']['p50_ms']:.2f} ms each, "
             "timed alone")
    cpu = result("timeline")["cpu_ms_per_message"]
    work = (f"CPU per message {cpu['sender']:.1f} ms in the sender's daemon, "
            f"{cpu['relay']:.1f} in the relay, {cpu['recipient']:.1f} in the recipient's")
    if held["p50_ms"] <= crosschat:
        verdict = "met"
    elif floor > crosschat:
        verdict = (f"not met: bounded by our durability, whose floor is {floor:.2f} ms ({parts}), "
                   "above crosschat's, which does not fsync per message")
    else:
        verdict = (f"not met: the floor of our durability is {floor:.2f} ms ({parts}), below "
                   f"crosschat's; the rest is the processes' own work ({work}; the stages are "
                   f"in the timeline){_scheduling(result('timeline'))}")
    return [["send → held, p50", f"{held['p50_ms']:.1f} ms",
             f"crosschat {crosschat:.1f} ms", "≤ crosschat's", verdict]]


def _held_tail(result: Result) -> list[Row]:
    """send → held, p99"""
    held, echo = result("latency")["send_to_held"], result("latency")["ws_echo_round_trip"]
    return [["send → held, p99", f"{held['p99_ms']:.1f} ms",
             f"raw echo p99 {echo['p99_ms']:.2f} ms", "≤ 10 ms", _tail_verdict(held, echo)]]


def _tail_verdict(ours: dict[str, float], echo: dict[str, float]) -> str:
    """Met, or how far the tail follows the median: a tail as wide as the raw echo's, on the
    same machine in the same run, is the machine's spread applied to our p50."""
    if ours["p99_ms"] <= 10:
        return "met"
    spread, echo_spread = ours["p99_ms"] / ours["p50_ms"], echo["p99_ms"] / echo["p50_ms"]
    if spread > 1.2 * echo_spread:
        return (f"not met: our p99 is {spread:.1f}× our p50, the raw echo's "
                f"{echo_spread:.1f}× its own: the tail is wider than the machine's")
    return (f"not met: bounded by the p50: p99 is {spread:.1f}× p50, as wide as the raw echo's "
            f"tail ({echo_spread:.1f}× its p50, same run), so 10 ms at p99 needs a p50 of "
            f"{10 / spread:.1f} ms")


def _hook(result: Result) -> list[Row]:
    """hook process, every event"""
    hook = result("hook")
    worst = max(hook[e]["x_baseline"] for e in HOOK_EVENTS)
    return [["hook process, every event, p50",
             ", ".join(f"{hook[e]['p50_ms']:.1f}" for e in HOOK_EVENTS) + " ms",
             f"bare interpreter {hook['baseline']['p50_ms']:.1f} ms", "≤ 1.2× bare",
             f"met (at most {worst:.2f}×)" if worst <= 1.2 else f"not met ({worst:.2f}×)"]]


def _mcp(result: Result) -> list[Row]:
    """`crosstalk server`: spawn → initialize"""
    hook = result("hook")
    ms = hook["mcp_initialize"]["p50_ms"]
    return [["`crosstalk server`: spawn → `initialize`", f"{ms:.0f} ms",
             f"bare interpreter {hook['baseline']['p50_ms']:.1f} ms", "≤ 400 ms",
             "met" if ms <= 400 else "not met"]]


def _read(result: Result) -> list[Row]:
    """`crosstalk read --json`"""
    hook = result("hook")
    ratio = hook["cli_read"]["p50_ms"] / hook["baseline"]["p50_ms"]
    return [["`crosstalk read --json` (start and one request)",
             f"{hook['cli_read']['p50_ms']:.1f} ms ({ratio:.2f}×)",
             f"bare interpreter {hook['baseline']['p50_ms']:.1f} ms", "≤ 1.5× bare",
             "met" if ratio <= 1.5 else "not met"]]


def _cold_start(result: Result) -> list[Row]:
    """daemon cold start → first status"""
    daemon = result("daemon")
    ms, bare = 1000 * daemon["daemon_cold_start_s"], 1000 * daemon["bare_interpreter_start_s"]
    verdict = "met" if ms <= 300 else (
        f"not met on this machine: {ms / bare:.1f}× its bare interpreter's start; at that "
        f"ratio 300 ms needs an interpreter that starts in {300 * bare / ms:.0f} ms")
    return [["daemon cold start → first `status`", f"{ms:.0f} ms",
             f"bare interpreter {bare:.0f} ms", "≤ 300 ms", verdict]]


def _relay(result: Result) -> list[Row]:
    """relay, 500 clients, one post in flight each"""
    r = result("relay_throughput")
    rows = []
    for x in r["runs"]:
        goal = RELAY_GOALS.get(x["room_size"])
        if goal is None or x["clients"] != 500 or x["window"] != 1:
            continue
        ratio = x["ops_per_s"] / x["echo_rt_per_s"]
        relay_us, client_us, target, need = relay_need(x, goal)
        costs = (f"at the costs measured in this row (relay {relay_us:.0f} µs, clients "
                 f"{client_us:.0f} µs per op) the goal's {target:,.0f} ops/s would take "
                 f"{need:.1f} cores")
        if ratio >= goal:
            verdict = "met"
        elif need > r["cpus"]:
            verdict = f"not met: bounded by CPU: {costs}, on a {r['cpus']}-core machine"
        else:
            verdict = f"not met, and not by CPU alone: {costs} of the {r['cpus']} here"
        rows.append([f"relay, 500 clients, 1 in flight, rooms of {x['room_size']}",
                     f"{x['ops_per_s']:,} ops/s ({ratio:.2f}×)",
                     f"echo {x['echo_rt_per_s']:,} round trips/s", f"≥ {goal}× echo", verdict])
    return rows


def _catchup(result: Result) -> list[Row]:
    """catch-up of 10,000 missed ops, against the floor of opening them"""
    c = result("catchup")
    s, ops, floor = c["missed_ops"]["seconds"], c["missed_ops"]["ops"], c["open_floor"]
    opening = floor["as_actor_seconds"]
    rest, ratio = s - opening, s / opening
    verdict = "met" if ratio <= 1.3 else (
        f"not met: opening and checking them alone, as the actor does, takes {opening:.2f} s "
        f"on this machine; applying and committing take the other {rest:.2f} s "
        f"({1e6 * rest / ops:.0f} µs per op), spread over decoding, the memory core, writing "
        f"the rows and the actor's own steps (`python -m bench.catchup --steps`)")
    return [[f"catch-up of {ops:,} missed ops", f"{s:.2f} s ({ratio:.1f}× floor)",
             f"floor (opening them as the actor does) {opening:.2f} s",
             "≤ 1.3× floor", verdict]]


def _history(result: Result) -> list[Row]:
    """flat in history"""
    points = result("history")["points"]
    worst = max(r for p in points for r in p["ratio"].values())
    most = max(p["messages"] for p in points)
    return [[f"send, read, hook, status after {most:,} messages",
             f"at most {worst:.2f}× fresh",
             "the same paths at 0 messages", "≤ 1.2×",
             "met" if worst <= 1.2 else f"not met ({worst:.2f}×)"]]
