"""The page's sections on one message and one process: side by side with the transport and the
peers, the daemon, pairing and catch-up, the hook and MCP server, and flatness in history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import plots
from bench.page import fmt
from bench.page.fmt import Row

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
        return fmt.failed("latency", runs.get("latency", {})) or ""
    rows, notes = _side_rows(lat, peers or {})
    plots.latency_cdf(_latency_series(lat, peers or {}), figures / "latency.png")
    table = fmt.table(["path (loopback, one at a time)", "p50", "p99", "p50 ÷ ceiling",
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


def _side_rows(lat: dict[str, Any], peers: dict[str, Any]) -> tuple[list[Row], list[str]]:
    """The side-by-side table's rows, and a note for each peer that did not run."""
    echo = lat["ws_echo_round_trip"]
    nats = peers.get("nats_core", {})
    nats_p50 = nats["latency"]["p50_ms"] if nats.get("available") else 0.0
    rows: list[Row] = []

    def row(label: str, fig: dict[str, float]) -> None:
        rows.append([label, fmt.ms(fig["p50_ms"]), fmt.ms(fig["p99_ms"]),
                     fmt.ratio(fig["p50_ms"], echo["p50_ms"]), fmt.ratio(fig["p50_ms"], nats_p50)])

    row("raw trio-websocket echo, 200 B (ceiling)", echo)
    notes = []
    for key, label in (("nats_core", "NATS core pub → sub, 200 B"),
                       ("crosschat", "crosschat send → monitor line")):
        peer: dict[str, Any] = peers.get(key) or {"available": False,
                                                  "why": "the peers benchmark failed"}
        if peer.get("available"):
            row(label, peer["latency"])
        else:
            rows.append([label, "not run", "", "", ""])
            notes.append(f"- *{label}* did not run here: {peer.get('why')}.")
    for key, label in SIDE_ROWS:
        if key in lat:
            row(label, lat[key])
    return rows, notes


#: Our rows of the side-by-side table, each shown when the run measured it.
SIDE_ROWS = (
    ("send_to_held", "**crosstalk send → held at recipient's daemon**"),
    ("send_to_sent", "crosstalk `send` request → `sent` reply"),
    ("send_to_notice_surfaced", "crosstalk send → notice surfaced by recipient's gate"),
    ("send_to_hook_printed", "**crosstalk send → notice printed by recipient's hook (pull)**"),
    ("notice_hook_run", "of which: the hook run that printed it"),
    ("send_to_inbox_pushed", "**crosstalk send → pushed into a busy session's inbox socket**"),
    ("send_to_channel_pushed",
     "**crosstalk send → channel notification from `crosstalk server` (MCP)**"),
    ("fsync_4k", "for scale: one fsync of a 4 KiB append, state disk"),
)


def _latency_series(lat: dict[str, Any], peers: dict[str, Any]) -> list[tuple[str, list[float]]]:
    """The latency plot's curves: the ceiling, the peers that ran, and ours."""
    series = [("raw trio-websocket echo (ceiling)", lat["echo_samples_ms"])]
    for key, label in (("nats_core", "NATS core"), ("crosschat", "crosschat")):
        peer = peers.get(key) or {}
        if peer.get("available") and peer.get("samples_ms"):
            series.append((label, peer["samples_ms"]))
    series.append(("crosstalk send → held at recipient", lat["held_samples_ms"]))
    for key, label in (("hook_samples_ms", "crosstalk send → notice printed by hook"),
                       ("inbox_samples_ms", "crosstalk send → inbox socket (push)"),
                       ("channel_samples_ms", "crosstalk send → MCP channel (push)")):
        if lat.get(key):
            series.append((label, lat[key]))
    return series


def _push_notes(lat: dict[str, Any]) -> str:
    """The push rows' note: each ÷ send → held of the same run, and the gate's share."""
    held = lat["send_to_held"]
    inbox, channel = lat["send_to_inbox_pushed"], lat["send_to_channel_pushed"]
    return PUSH_NOTES.format(
        pushes=lat["pushes"],
        inbox_held=f"{inbox['p50_ms'] / held['p50_ms']:.1f}",
        inbox_held99=f"{inbox['p99_ms'] / held['p99_ms']:.1f}",
        inbox_surfaced=fmt.ms(lat["send_to_inbox_surfaced"]["p50_ms"]),
        channel_held=f"{channel['p50_ms'] / held['p50_ms']:.0f}",
        channel_held99=f"{channel['p99_ms'] / held['p99_ms']:.0f}",
        channel_surfaced=fmt.ms(lat["send_to_channel_surfaced"]["p50_ms"]),
        load_before=lat.get("load_before", "?"), load_after=lat.get("load_after", "?"),
    )


def daemon(runs: dict[str, Any]) -> str:
    from bench.daemon import table

    run = runs.get("daemon", {})
    body = fmt.failed("daemon", run) or table(run["result"])
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


def pairing_and_catchup(runs: dict[str, Any]) -> str:
    """Pairing against SPAKE2 alone, and catch-up against the floor of opening its ops."""
    parts = ["## Pairing (`bench/pairing.py`) and catch-up (`bench/catchup.py`)", "",
             *_pairing(runs.get("pairing", {}))]
    catchup = runs.get("catchup", {})
    if fmt.failed("catchup", catchup):
        parts.append(str(fmt.failed("catchup", catchup)))
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
        parts += [fmt.table(["measure", "figure", "per item"], [
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


def _pairing(pairing: dict[str, Any]) -> list[str]:
    failed = fmt.failed("pairing", pairing)
    if failed:
        return [failed]
    full = pairing["result"]["full_exchange_both_sides"]
    spake = pairing["result"]["spake2_only_both_sides"]
    return [fmt.table(["measure", "crosstalk", "baseline (same run)", "ratio"], [[
        "full pairing exchange, both sides, median wall",
        fmt.ms(full["wall_median_ms"]), f"SPAKE2 alone {fmt.ms(spake['wall_median_ms'])}",
        fmt.ratio(full["wall_median_ms"], spake["wall_median_ms"])]]), "",
        "Both sides in one process, no network: SPAKE2, key confirmation, sealed offers. "
        "The baseline is the two SPAKE2 exchanges alone, the floor of any such pairing.", ""]


def hook(runs: dict[str, Any]) -> str:
    """Hook wall time per event and MCP ``initialize``, against a bare interpreter."""
    run = runs.get("hook", {})
    head = "## Hook and MCP server (`bench/hook.py`)\n\n"
    if fmt.failed("hook", run):
        return head + str(fmt.failed("hook", run))
    r = run["result"]
    base = r["baseline"]
    labels = {"daemon_down": "hook, daemon down (empty answer)",
              "module_prompt": "hook `UserPromptSubmit` as `python -m crosstalk.hook.main`",
              "script_prompt": "hook `UserPromptSubmit` as the `crosstalk-hook` script",
              "cli_read": "`crosstalk read --json`: CLI start-up and one request",
              "mcp_initialize": "`crosstalk server`: spawn → `initialize` returns",
              "mcp_discover": "`crosstalk server`: spawn → modern `server/discover` returns",
              "mcp_initialize_sdk_only": "the same, SDK alone (no stdlib front end)"}
    rows = [[labels.get(name, f"hook `{name}`"), fmt.ms(fig["p50_ms"]), fmt.ms(fig["p95_ms"]),
             fmt.ratio(fig["p50_ms"], base["p50_ms"])]
            for name, fig in r.items() if name != "baseline"]
    return head + "\n".join([
        fmt.table(["process, wall time", "p50", "p95", "p50 ÷ bare interpreter"], rows), "",
        f"Baseline, same run and interleaved: `python -c 'import json, socket'`, p50 "
        f"{fmt.ms(base['p50_ms'])}. Each hook runs as the installers write it into client configs "
        "(`python -I -S …/crosstalk/hook/launch.py`: no site-packages processing) for Claude "
        "Code, against a real paired daemon on a real relay, and sends one request on the "
        "control socket (`hook_event`; `notice_shown` follows only an answer that showed "
        "notices). The script row runs the `crosstalk-hook` console script instead (as the "
        "Claude Code plugin's hooks do): its wrapper and `site` on top. See `bench/hook.py` for "
        "the details.", "",
    ])


def history(runs: dict[str, Any]) -> str:
    """Send, read, hook and status as history grows, each ÷ the same path at 0 messages."""
    head = "## Flat in history (`bench/history.py`)\n\n"
    run = runs.get("history")
    if run is None:
        return head + "Not measured in this run.\n"
    failed = fmt.failed("history", run)
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
    table = fmt.table(["messages held", "send", "read + ack", "hook (UserPromptSubmit)", "status",
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
