"""The page's sections on load and size: relay throughput, the scaling curves (members per
room, a room of real daemons, rooms per daemon, connections per relay) and relay nodes on NATS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench import plots
from bench.page import fmt
from bench.page.goals import RELAY_GOALS, relay_need


def relay(runs: dict[str, Any], figures: Path) -> str:
    run = runs.get("relay_throughput", {})
    if fmt.failed("relay_throughput", run):
        return "## Relay throughput (`bench/relay_throughput.py`)\n\n" + str(
            fmt.failed("relay_throughput", run))
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
        fmt.table(["clients", "room size", "in flight", "ops/s", "deliveries/s",
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


def _curve(title: str, points: list[dict[str, Any]], memory_key: str, memory_label: str,
           png: Path, x_label: str) -> str:
    failed = [p for p in points if "error" in p]
    points = [p for p in points if "error" not in p]
    if not points:
        return f"### {title}\n\nNo point of this curve completed.\n" + _errors(failed)
    first = points[0]
    rows = [[f"{p['x']:,}", fmt.ms(p["latency"]["p50_ms"]), fmt.ms(p["latency"]["p99_ms"]),
             fmt.ratio(p["latency"]["p50_ms"], first["latency"]["p50_ms"]),
             f"{p[memory_key] / 1024:.1f} MiB",
             fmt.ratio(p[memory_key], first[memory_key]) if first[memory_key] > 0 else "—"]
            for p in points]
    rows += [[f"{p['x']:,}", "failed (below)", "", "", "", ""] for p in failed]
    plots.curve(points, memory_key, memory_label, x_label, png, title)
    return "\n".join([
        f"### {title}", "",
        fmt.table([x_label, "p50", "p99", f"p50 ÷ at {first['x']}", memory_label,
                f"÷ at {first['x']}"], rows), "",
        f"![{title}](performance/{png.name})", "", _errors(failed),
    ])


def _errors(failed: list[dict[str, Any]]) -> str:
    return "".join(f"- At {p['x']:,}: {p['error']}\n" for p in failed)


def scaling(runs: dict[str, Any], figures: Path) -> str:
    run = runs.get("scaling", {})
    head = "## Scaling curves (`bench/scaling.py`)\n"
    if fmt.failed("scaling", run):
        return head + "\n" + str(fmt.failed("scaling", run))
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
    return text + _members_bounds(done)


def _members_bounds(done: list[dict[str, Any]]) -> str:
    """What bounds issue 41's room-of-200 goals, where the run recorded it: the fake members'
    CPU per post (one process beside the relay) and one commit timed alone in its data
    directory (a build is its commits one after another)."""
    text = ""
    if done and "bench_cpu_per_post_ms" in done[-1]:
        text += (" The fake members' CPU per post, receiving it: " + ", ".join(
            f"{p['bench_cpu_per_post_ms']:.2f} ms at {p['x']:,}" for p in done) + ".")
    if done and "commit_p50_ms" in done[-1]:
        last = done[-1]
        text += (f" One WAL commit (`synchronous=FULL`) timed alone in the relay's data "
                 f"directory after the point at {last['x']:,}: {fmt.ms(last['commit_p50_ms'])} "
                 f"at p50, so its {last['build_commits']:,} commits take "
                 f"{last['build_commits'] * last['commit_p50_ms'] / 1000:.1f} s at least.")
    return text


def _real_room(runs: dict[str, Any]) -> str:
    """The room of real daemons (``bench/big_room.py``), when it ran."""
    run = runs.get("big_room")
    head = "### A room of real daemons (`bench/big_room.py`)\n\n"
    if run is None:
        return head + "Not measured in this run.\n"
    if fmt.failed("big_room", run):
        return head + str(fmt.failed("big_room", run))
    r = run["result"]
    n, two = r["members"], r["room_of_2"]
    wide, cpu = r[f"room_of_{n}"], r["cpu_ms_per_op"]
    big_cpu = cpu[f"room_of_{n}"]
    rows = [[f"{size}", fmt.ms(fig["p50_ms"]), fmt.ms(fig["p99_ms"]),
             fmt.ratio(fig["p50_ms"], two["p50_ms"]), f"{c['relay']:.1f}", f"{c['host']:.1f}",
             f"{c['guests_total']:.1f} ({c['busiest_guest']:.1f})", f"{c['bench_poller']:.1f}"]
            for size, fig, c in ((2, two, cpu["room_of_2"]), (n, wide, cpu[f"room_of_{n}"]))]
    return head + "\n".join([
        fmt.table(["members", "fact → last member p50", "p99", "p50 ÷ room of 2",
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
    if fmt.failed("nats_relay", run):
        return head + str(fmt.failed("nats_relay", run))
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
            fmt.ratio(entry["ops_per_s"], base["ops_per_s"]) if thrpt else "",
            fmt.ms(posted["p50_ms"]), fmt.ms(push["p50_ms"]), fmt.ms(push["p99_ms"]),
            fmt.ratio(push["p50_ms"], base["latency"]["post_to_push"]["p50_ms"]),
        ])
    return head + "\n".join([
        fmt.table(["setup", "ops/s", "÷ SQLite", "post → posted p50", "post → push p50",
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
