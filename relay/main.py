"""Run a relay in the foreground until SIGTERM or SIGINT (what ``crosstalk relay serve`` calls)."""

from __future__ import annotations

import base64
import logging
import signal
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from crosstalk.errors import UsageError
from crosstalk.paths import relay_data_dir
from relay.keys import load_or_create_key, prepare_data_dir
from relay.limits import RelayConfig
from relay.server import RelayServer
from relay.sqlite_store import SqliteStorage
from relay.storage import RelayStorage

DEFAULTS = RelayConfig()
#: What a Cloudflare tunnel reports as the client's own address.
TUNNEL_ADDRESS_HEADER = "Cf-Connecting-Ip"


@attrs.frozen
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8787
    data: Path | None = None
    retention: float = DEFAULTS.retention
    op_rate: float = DEFAULTS.op_rate
    tls_cert: Path | None = None
    tls_key: Path | None = None
    nats: str | None = None  # NATS URL(s), comma-separated: a stateless node (relay/node.py)
    nats_replicas: int = 1
    behind_tunnel: bool = False  # trust the local tunnel's client-address header


def _ssl_context(opts: ServeOptions) -> ssl.SSLContext | None:
    if (opts.tls_cert is None) != (opts.tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if opts.tls_cert is None or opts.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(opts.tls_cert), str(opts.tls_key))
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load the TLS certificate or key: {exc}") from None
    return context


def serve(opts: ServeOptions, on_listening: Callable[[str, str], None]) -> None:
    """Serve until a signal; ``on_listening(url, pubkey_b64)`` is called once it accepts."""
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )
    data = (opts.data or relay_data_dir()).expanduser().absolute()
    context = _ssl_context(opts)
    prepare_data_dir(data)
    key = load_or_create_key(data)
    config = attrs.evolve(
        DEFAULTS, retention=opts.retention, op_rate=opts.op_rate,
        op_burst=max(DEFAULTS.op_burst, opts.op_rate * 5),
    )
    storage: RelayStorage
    if opts.nats:
        from relay.nats_store import NatsStorage
        from relay.node import NodeServer

        nats_storage = NatsStorage(opts.nats, replicas=opts.nats_replicas)
        storage = nats_storage
        try:
            server: RelayServer = NodeServer(nats_storage, bytes(key), config=config)
        except BaseException:
            nats_storage.close()
            raise
    else:
        storage = SqliteStorage(data / "relay.db")
        server = RelayServer(
            storage, bytes(key), config=config,
            client_address_header=TUNNEL_ADDRESS_HEADER if opts.behind_tunnel else None,
        )
    scheme = "wss" if context else "ws"
    pubkey = base64.b64encode(bytes(key.verify_key)).decode()

    async def main() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(
                    lambda task_status: server.serve(
                        opts.host, opts.port, ssl_context=context, task_status=task_status
                    )
                )
                on_listening(f"{scheme}://{opts.host}:{port}", pubkey)
                async for signum in signals:
                    logging.getLogger(__name__).info("relay stopping on signal %d", signum)
                    nursery.cancel_scope.cancel()
                    break

    try:
        trio.run(main)
    finally:
        storage.close()
