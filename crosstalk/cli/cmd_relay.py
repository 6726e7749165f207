"""`crosstalk relay serve|status`: run a relay in the foreground, or check one."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from crosstalk.cli.options import JsonOption
from crosstalk.cli.output import Output, reports_errors

app = typer.Typer(help="Run or check a relay.", no_args_is_help=True)

DEFAULT_RELAY = "ws://127.0.0.1:8787"


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
            "its Cf-Connecting-Ip header (only on loopback connections) for pairing limits.",
        ),
    ] = False,
    json_output: JsonOption = False,
) -> None:
    """Run a relay in the foreground until SIGTERM or Ctrl-C."""
    from relay.main import ServeOptions
    from relay.main import serve as run_relay

    out = Output(json_mode=json_output)
    opts = ServeOptions(host, port, data, retention, op_rate, tls_cert, tls_key, nats=nats,
                        nats_replicas=nats_replicas, behind_tunnel=behind_tunnel)

    def listening(url: str, pubkey: str) -> None:
        out.emit({"listening": url, "pubkey": pubkey}, f"relay listening on {url} (key {pubkey})")

    run_relay(opts, listening)


def _health_url(relay: str) -> str:
    base = relay.rstrip("/")
    for ws, http in (("wss://", "https://"), ("ws://", "http://")):
        if base.startswith(ws):
            base = http + base[len(ws) :]
    if base.endswith("/ws"):
        base = base[: -len("/ws")]
    return base + "/health"


def check_health(relay: str, timeout: float = 3.0) -> bool:
    """True when ``GET /health`` answers ``{"ok": true}`` within ``timeout`` seconds."""
    import urllib.request  # http.client, email, ssl: only for this command

    try:
        with urllib.request.urlopen(_health_url(relay), timeout=timeout) as resp:
            return bool(json.loads(resp.read(65536)).get("ok"))
    except (OSError, ValueError, AttributeError):
        return False


@app.command()
@reports_errors
def status(
    relay: Annotated[
        str | None, typer.Option("--relay", help="Relay URL (default: CROSSTALK_RELAY).")
    ] = None,
    json_output: JsonOption = False,
) -> None:
    """Say whether a relay answers its health check."""
    url = relay or os.environ.get("CROSSTALK_RELAY") or DEFAULT_RELAY
    reachable = check_health(url)
    Output(json_mode=json_output).emit(
        {"url": url, "reachable": reachable},
        f"{url} is {'reachable' if reachable else 'not reachable'}",
    )
