"""`crosstalk relay serve|status|start|stop`: run a relay in the foreground, check one, or
start and stop the local relay on loopback that every home on this machine shares."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from crosstalk.cli.options import HomeOption, JsonOption
from crosstalk.cli.output import Output, reports_errors

app = typer.Typer(help="Run or check a relay.", no_args_is_help=True)

DEFAULT_RELAY = "ws://127.0.0.1:8787"
# `serve`'s limit options default to relay.limits.RelayConfig's values, written out here because
# a command must not import the relay (or attrs) to parse; tests/relay/test_serve_limits.py
# keeps them equal.


@app.command()
@reports_errors
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port; 0 picks a free one.")] = 8787,
    data: Annotated[
        Path | None, typer.Option(help="State directory (default: per-user data dir).")
    ] = None,
    retention: Annotated[float, typer.Option(help="Seconds an unacknowledged op is kept.")] = 24
    * 3600.0,
    op_rate: Annotated[float, typer.Option(help="Ops per second per identity.")] = 100.0,
    tls_cert: Annotated[Path | None, typer.Option(help="TLS certificate (PEM) for wss://.")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="TLS private key (PEM).")] = None,
    nats: Annotated[
        str | None, typer.Option(help="Run as a cluster node on NATS JetStream (nats://HOST:PORT).")
    ] = None,
    nats_replicas: Annotated[
        int, typer.Option(help="JetStream replicas for the relay's streams (3 on a 3-node NATS).")
    ] = 1,
    behind_tunnel: Annotated[
        bool,
        typer.Option(
            help="A tunnel on this machine fronts the relay: take each client's address from "
            "its Cf-Connecting-Ip header (only on loopback connections) for per-address limits.",
        ),
    ] = False,
    max_connections_per_address: Annotated[
        int, typer.Option(help="Authenticated connections one address may hold (an IPv6 /64 "
                               "counts as one address); past it the idlest of them is shed.")
    ] = 128,
    max_connections_per_identity: Annotated[
        int, typer.Option(help="Authenticated connections one identity may hold; past it its "
                               "idlest is shed.")
    ] = 32,
    max_connections: Annotated[
        int, typer.Option(help="Authenticated connections in all (lowered to fit the file "
                               "descriptor limit); past it the busiest address's idlest goes.")
    ] = 10_000,
    slot_rate: Annotated[
        float, typer.Option(help="Pairing slot opens and joins per second per address "
                                 "(bursts of 20; an identity: one per 10 s, bursts of 6).")
    ] = 1 / 3,
    max_slots_per_address: Annotated[
        int, typer.Option(help="Live pairing slots (open or joined, until closed or expired) "
                               "opened from one address.")
    ] = 64,
    slot_work_bits: Annotated[
        int, typer.Option(help="Proof of work a new identity pays per pairing slot, in bits "
                               "(17: about 0.13 s of one core; 0 asks none).")
    ] = 17,
    log_file: Annotated[
        Path | None, typer.Option(help="Write the log to this file, rotated at "
                                       "CROSSTALK_LOG_MAX_BYTES (default: stderr).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Run a relay in the foreground until SIGTERM or Ctrl-C."""
    from relay.main import ServeOptions
    from relay.main import serve as run_relay

    out = Output(json_mode=json_output)
    opts = ServeOptions(host, port, data, retention, op_rate, tls_cert, tls_key, nats=nats,
                        nats_replicas=nats_replicas, behind_tunnel=behind_tunnel,
                        max_per_source=max_connections_per_address,
                        max_per_identity=max_connections_per_identity,
                        max_authenticated=max_connections, slot_rate=slot_rate,
                        max_slots_per_source=max_slots_per_address,
                        slot_work_bits=slot_work_bits, log_file=log_file)

    def listening(url: str, pubkey: str) -> None:
        out.emit({"listening": url, "pubkey": pubkey}, f"relay listening on {url} (key {pubkey})")

    run_relay(opts, listening)


@app.command()
@reports_errors
def status(
    relay: Annotated[
        str | None, typer.Option("--relay", help="Relay URL (default: CROSSTALK_RELAY).")
    ] = None,
    json_output: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Say whether a relay answers its health check."""
    del home  # accepted like on every command; the relay is named by --relay
    url = relay or os.environ.get("CROSSTALK_RELAY") or DEFAULT_RELAY
    from crosstalk.hosting.local_relay import check_health

    reachable = check_health(url)
    Output(json_mode=json_output).emit(
        {"url": url, "reachable": reachable},
        f"{url} is {'reachable' if reachable else 'not reachable'}",
    )


def _local_relay_pid() -> int | None:
    """The pid of the local relay a daemon (or `relay start`) started, if it still runs."""
    from crosstalk.cli.cmd_daemon import _alive
    from crosstalk.paths import relay_data_dir

    try:
        pid = int((relay_data_dir() / "relay.pid").read_text().strip() or 0)
    except (OSError, ValueError):
        return None
    return pid if pid and _alive(pid) else None


@app.command()
@reports_errors
def start(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Start the local relay on loopback (the one every home here shares) unless it runs."""
    del home  # the local relay is the machine's, not one home's; accepted like everywhere
    from crosstalk.hosting.local_relay import LOCAL_RELAY, ensure_local_relay

    ensure_local_relay()
    pid = _local_relay_pid()
    Output(json_mode=json_output).emit(
        {"url": LOCAL_RELAY, "running": True, "pid": pid},
        f"local relay running at {LOCAL_RELAY}" + (f" (pid {pid})" if pid else ""),
    )


@app.command()
@reports_errors
def stop(json_output: JsonOption = False, home: HomeOption = None) -> None:
    """Stop the local relay (SIGTERM, by the pid it was started with) and wait until it is gone."""
    del home
    import signal
    import time

    from crosstalk.cli.cmd_daemon import _alive
    from crosstalk.hosting.local_relay import LOCAL_RELAY, check_health

    pid = _local_relay_pid()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
    running = check_health(LOCAL_RELAY, timeout=1.0)
    human = "the local relay is not running" if pid is None else f"local relay stopped (pid {pid})"
    if running:
        human = f"a relay still answers at {LOCAL_RELAY} (not one this machine's daemons started)"
    Output(json_mode=json_output).emit({"url": LOCAL_RELAY, "running": running, "pid": pid}, human)
