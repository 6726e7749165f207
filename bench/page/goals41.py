"""Issue 41's goals (speed at the edges) as rows of the page's goal table (bench/page/goals.py):
the send path's tail, the pushes into a busy session, rooms of hundreds, disk per message and the
state a busy identity keeps. Each row's figure and its bound come from the run's results; a row
whose benchmark did not run raises ``KeyError``, and the table says "not measured in this run".
Issue 41 sets no figure for the pushes or the room of real daemons: their verdict is "measured".
"""

from __future__ import annotations

from typing import Any

from bench.page.fmt import Result, Row, ms

TAIL_SPREAD = 2.0  # send → held p99 ≤ 2× its p50
BUILD_S = 5.0  # a room of 200 builds in ≤ 5 s
ROOM_SPREAD = 8.0  # its post → last member p50 ≤ 8× a room of 2's, same run
BIG, SMALL = 200, 2
DISK_BYTES = 1000  # ≤ 1 KB of state.db per 200-byte message


def held_spread(result: Result) -> list[Row]:
    """send → held, p99 ÷ p50"""
    lat = result("latency")
    held, echo = lat["send_to_held"], lat["ws_echo_round_trip"]
    spread, echo_spread = held["p99_ms"] / held["p50_ms"], echo["p99_ms"] / echo["p50_ms"]
    if spread <= TAIL_SPREAD:
        verdict = "met"
    else:
        fsync = lat["fsync_4k"]
        whose = ("as wide as the raw echo's" if spread <= 1.2 * echo_spread
                 else "wider than the raw echo's")
        verdict = (f"not met: the tail is {whose} ({echo_spread:.1f}× its p50) and one 4 KiB "
                   f"fsync's p99 was {ms(fsync['p99_ms'])} against its p50 "
                   f"{ms(fsync['p50_ms'])}, with three fsynced commits on the path (same run)")
    return [["send → held, p99 ÷ p50",
             f"{spread:.2f}× ({ms(held['p99_ms'])} ÷ {ms(held['p50_ms'])})",
             f"raw echo p99 ÷ p50 {echo_spread:.1f}×", f"≤ {TAIL_SPREAD:g}×", verdict]]


def pushes(result: Result) -> list[Row]:
    """send → pushed into a busy Claude Code session"""
    lat = result("latency")
    held = lat["send_to_held"]
    rows = []
    for key, path in (("send_to_inbox_pushed", "send → a busy session's inbox socket"),
                      ("send_to_channel_pushed", "send → channel notification (MCP)")):
        push = lat[key]
        rows.append([path, f"p50 {ms(push['p50_ms'])}, p99 {ms(push['p99_ms'])}",
                     f"send → held p50 {ms(held['p50_ms'])}, p99 {ms(held['p99_ms'])}",
                     "a row next to send → held (no figure set)",
                     f"measured: p50 {push['p50_ms'] / held['p50_ms']:.1f}× send → held's"])
    return rows


def _points(result: Result) -> tuple[dict[str, Any], dict[str, Any]]:
    """The members-per-room curve's room of 2 and room of 200 (KeyError if either is absent or
    failed: a quick run's curve stops at 3 members)."""
    at = {p["x"]: p for p in result("scaling")["members_per_room"] if "error" not in p}
    return at[SMALL], at[BIG]


def room_build(result: Result) -> list[Row]:
    """room of 200: built"""
    small, big = _points(result)
    build = big["build_s"]
    if build <= BUILD_S:
        verdict = "met"
    else:
        commit = big.get("commit_p50_ms")
        floor = ("" if commit is None else
                 f" (one timed alone in the relay's data directory: {ms(commit)} at p50, so "
                 f"{big['build_commits'] * commit / 1000:.1f} s for all)")
        verdict = (f"not met: the build is {big['build_commits']:,} commits one after another, "
                   f"each waiting for its fsync{floor}; the relay's CPU "
                   f"{big['build_relay_cpu_s']:.1f} s, the fake clients' "
                   f"{big['build_bench_cpu_s']:.1f} s")
    return [[f"room of {BIG}: built (fake clients, one relay)", f"{build:.2f} s",
             f"room of {SMALL} {small['build_s']:.2f} s", f"≤ {BUILD_S:g} s", verdict]]


def room_spread(result: Result) -> list[Row]:
    """room of 200: post → last member, p50"""
    small, big = _points(result)
    p50, base = big["latency"]["p50_ms"], small["latency"]["p50_ms"]
    ratio, budget = p50 / base, ROOM_SPREAD * base
    if ratio <= ROOM_SPREAD:
        verdict = "met"
    else:
        relay, ours = big["relay_cpu_per_post_ms"], big.get("bench_cpu_per_post_ms")
        spent = (f"per post the relay spent {ms(relay)} of CPU "
                 f"({ms(small['relay_cpu_per_post_ms'])} in the room of {SMALL})")
        if ours is not None:
            spent += f" and the {BIG - 1} fake members, in one process beside it, {ms(ours)}"
        if relay >= budget:
            verdict = f"not met: bounded by the relay's CPU: {spent}; the goal is {ms(budget)}"
        elif relay + (ours or 0.0) >= budget:
            verdict = (f"not met: bounded by CPU: {spent}, together more than the goal's "
                       f"{ms(budget)}, on the same cores")
        elif ours is None:
            verdict = (f"not met: {spent}; the goal is {ms(budget)}; the fake members' CPU per "
                       "post was not recorded in this run")
        else:
            verdict = f"not met, and not by CPU alone: {spent}; the goal is {ms(budget)}"
    return [[f"room of {BIG}: post → last member, p50", f"{ms(p50)} ({ratio:.1f}×)",
             f"room of {SMALL} {ms(base)}", f"≤ {ROOM_SPREAD:g}× room of {SMALL}", verdict]]


def real_room(result: Result) -> list[Row]:
    """a room of real daemons: fact → last member"""
    r = result("big_room")
    n, two = r["members"], r["room_of_2"]
    wide, cpu = r[f"room_of_{n}"], r["cpu_ms_per_op"][f"room_of_{n}"]
    return [[f"room of {n} real daemons: fact → last member, p50",
             f"{ms(wide['p50_ms'])} ({wide['p50_ms'] / two['p50_ms']:.1f}×)",
             f"room of 2, same daemons {ms(two['p50_ms'])}",
             "a row of real daemons (no figure set)",
             f"measured: per op the guests' daemons spent {cpu['guests_total']:.1f} ms of CPU "
             f"together, the relay {cpu['relay']:.1f}, the host {cpu['host']:.1f}"]]


def disk(result: Result) -> list[Row]:
    """disk per 200-byte message"""
    d = result("disk_per_message")
    sides = {side: d[f"{side}_bytes_per_message"] for side in ("sender", "recipient")}
    over = [side for side, size in sides.items() if size > DISK_BYTES]
    if not over:
        verdict = "met"
    else:
        verdict = "not met: the largest parts, bytes per message: " + "; ".join(
            f"{side} " + ", ".join(f"`{table}` {size:,.0f}"
                                   for table, size in _largest(d[f"{side}_by_table"]))
            for side in over)
    return [[f"`state.db` per {d['payload_bytes']}-byte message",
             ", ".join(f"{side} {size:,.0f} B" for side, size in sides.items()),
             f"payload {d['payload_bytes']} B", f"≤ 1 KB ({DISK_BYTES:,} B)", verdict]]


def _largest(tables: dict[str, float], count: int = 3) -> list[tuple[str, float]]:
    return sorted(tables.items(), key=lambda item: -item[1])[:count]


def soak(result: Result) -> list[Row]:
    """a busy identity's state, an hour of a room's traffic"""
    del result  # no run of python -m bench has it: the row says where the figures are
    return [["a busy identity's `state.db`, an hour of a room's traffic",
             "not measured in this run", "—", "grows only with what it keeps",
             "not part of `python -m bench` (an hour-long soak, "
             "`python -m bench.disk_per_message --soak`): measured by hand, in the notes under "
             "Disk per message"]]
