"""Run a relay in the foreground until SIGTERM or SIGINT (what ``crosstalk relay serve`` calls)."""

from __future__ import annotations

import base64
import gc
import logging
import math
import os
import signal
import ssl
import sys
from collections.abc import Callable
from pathlib import Path

import attrs
import trio

from crosstalk.crypto import MAX_WORK_BITS
from crosstalk.errors import UsageError
from crosstalk.logs import BACKUPS, LOG_MAX_BYTES_ENV, PrivateRotatingFileHandler, max_bytes_from
from crosstalk.paths import positive_seconds, relay_data_dir
from relay.keys import load_or_create_key, prepare_data_dir
from relay.limits import RelayConfig
from relay.server import RelayServer, ShellTimings
from relay.sqlite_store import SqliteStorage
from relay.storage import RelayStorage

DEFAULTS = RelayConfig()
MAX_PORT = 65535
#: What a Cloudflare tunnel reports as the client's own address.
TUNNEL_ADDRESS_HEADER = "Cf-Connecting-Ip"
#: Seconds between the relay's pings of an idle connection, and a ping's time to be answered
#: (default 20 each). For tests: a scenario about a dead peer need not wait 40 s for its drop,
#: as ``CROSSTALK_HEARTBEAT`` shortens a daemon's heartbeat.
RELAY_PING_ENV = "CROSSTALK_RELAY_PING"
#: Seconds between a NATS node's presence announcements (default 5); a node silent for three of
#: them has nobody online. For tests too: a dead node's clients go offline 15 s later otherwise.
NODE_BEAT_ENV = "CROSSTALK_RELAY_NODE_BEAT"
#: Seconds a connection may stay before its hello (``RelayConfig.hello_timeout``, default 10).
#: For tests: shedding idle unauthenticated connections need not take 10 s there.
HELLO_TIMEOUT_ENV = "CROSSTALK_RELAY_HELLO_TIMEOUT"


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
    max_per_source: int = DEFAULTS.max_per_source
    max_per_identity: int = DEFAULTS.max_per_identity
    max_authenticated: int = DEFAULTS.max_authenticated
    slot_rate: float = DEFAULTS.slot_rate
    max_slots_per_source: int = DEFAULTS.max_slots_per_source
    slot_work_bits: int = DEFAULTS.slot_work_bits
    log_file: Path | None = None  # the log, rotated by size (CROSSTALK_LOG_MAX_BYTES); else stderr


def relay_config(opts: ServeOptions) -> RelayConfig:
    """The core's limits from the serve options.

    Raises:
        UsageError: a limit that cannot work (a cap below 1, a negative rate, more proof of
            work than crosstalk clients will do).
    """
    if min(opts.max_per_source, opts.max_per_identity, opts.max_authenticated,
           opts.max_slots_per_source) < 1:
        raise UsageError("connection and slot limits must be at least 1")
    if opts.slot_rate < 0 or not 0 <= opts.slot_work_bits <= MAX_WORK_BITS:
        raise UsageError(f"--slot-rate must not be negative, --slot-work-bits must be "
                         f"0-{MAX_WORK_BITS}")
    return attrs.evolve(
        DEFAULTS, retention=opts.retention, op_rate=opts.op_rate,
        op_burst=max(DEFAULTS.op_burst, opts.op_rate * 5),
        max_per_source=opts.max_per_source, max_per_identity=opts.max_per_identity,
        max_authenticated=opts.max_authenticated, slot_rate=opts.slot_rate,
        max_slots_per_source=opts.max_slots_per_source, slot_work_bits=opts.slot_work_bits,
    )


def with_hello_timeout(config: RelayConfig, raw: str | None) -> RelayConfig:
    """``config`` with the hello timeout from ``CROSSTALK_RELAY_HELLO_TIMEOUT`` when it is a
    positive number of seconds (anything else keeps ``config``'s)."""
    hello = positive_seconds(raw)
    return config if hello is None else attrs.evolve(config, hello_timeout=hello)


def shell_timings(raw: str | None) -> ShellTimings:
    """The shell's timings, with the pings from ``CROSSTALK_RELAY_PING`` when it is a positive
    number of seconds (anything else keeps the defaults)."""
    ping = positive_seconds(raw)
    if ping is None:
        return ShellTimings()
    return ShellTimings(ping_interval=ping, ping_timeout=ping)


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


def _open_server(
    opts: ServeOptions, key: bytes, config: RelayConfig, data: Path
) -> tuple[RelayStorage, RelayServer]:
    """The storage and the server over it: a stateless node on NATS, or SQLite in ``data``."""
    header = TUNNEL_ADDRESS_HEADER if opts.behind_tunnel else None
    timings = shell_timings(os.environ.get(RELAY_PING_ENV))
    if opts.nats:
        # Imported only when asked for: the NATS client is an optional dependency.
        from relay.nats_store import NatsStorage
        from relay.node import NodeServer
        from relay.node_presence import NodeTimings

        beat = positive_seconds(os.environ.get(NODE_BEAT_ENV))
        presence = None if beat is None else NodeTimings(beat=beat, presence_timeout=3 * beat)
        nats_storage = NatsStorage(opts.nats, replicas=opts.nats_replicas)
        try:
            return nats_storage, NodeServer(nats_storage, key, config=config, timings=timings,
                                            node_timings=presence, client_address_header=header)
        except BaseException:
            nats_storage.close()
            raise
    storage = SqliteStorage(data / "relay.db")
    server = RelayServer(storage, key, config=config, timings=timings,
                         client_address_header=header)
    return storage, server


async def _serve_until_signal(
    server: RelayServer, opts: ServeOptions, context: ssl.SSLContext | None,
    on_listening: Callable[[str], None],
) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(
                lambda task_status: server.serve(
                    opts.host, opts.port, ssl_context=context, task_status=task_status
                )
            )
            on_listening(f"{'wss' if context else 'ws'}://{opts.host}:{port}")
            async for signum in signals:
                logging.getLogger(__name__).info("relay stopping on signal %d", signum)
                nursery.cancel_scope.cancel()
                break


def _tune_gc() -> None:
    """Collect cycles less often, and never look again at what exists once the state is loaded.

    Every op makes a few dozen short-lived objects (its frames, a ``Send`` per recipient), so
    with the default thresholds (700, 10, 10) the cycle collector ran every few dozen ops and
    walked the young generations, and now and then every object the relay holds (each
    connection's tasks, rooms, held ops). py-spy put 13% of the relay's CPU in rooms of 20 on
    the allocation of ``Send``, where those collections land. Most of these objects are freed by
    their reference count alone; a cycle simply waits longer. Relay CPU per op, 500 clients one
    post in flight, A/B interleaved 3 rounds: 234 -> 186 us in rooms of 20, 145 -> 134 us in rooms
    of 2.
    """
    gc.collect()
    gc.freeze()  # the loaded snapshot and the imports: long-lived, never garbage to scan for
    gc.set_threshold(20_000, 20, 10)


def check_options(opts: ServeOptions) -> None:
    """Refuse options no relay can run with, before anything is opened: a port the OS would
    wrap to another one (99999 bound 34463), a retention or rate that is not a positive number.

    Raises:
        UsageError: naming the option and what it takes.
    """
    if not 0 <= opts.port <= MAX_PORT:
        raise UsageError(f"--port {opts.port} is not a TCP port: use 0 to {MAX_PORT} "
                         "(0 picks a free one).")
    for name, value in (("--retention", opts.retention), ("--op-rate", opts.op_rate)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{name} {value:g} is not a positive number of "
                             f"{'seconds' if name == '--retention' else 'ops per second'}.")
    if opts.nats_replicas < 1:
        raise UsageError(f"--nats-replicas {opts.nats_replicas} is not a number of replicas: "
                         "use 1 or more.")


def _configure_logging(path: Path | None) -> None:
    """The relay's log: to ``path``, rotated like daemon.log (``CROSSTALK_LOG_MAX_BYTES``,
    :data:`~crosstalk.logs.BACKUPS` old files, 0600), or to stderr without one."""
    fmt = "%(asctime)s %(name)s %(message)s"
    if path is None:
        logging.basicConfig(stream=sys.stderr, level=logging.INFO, format=fmt)
        return
    size, problem = max_bytes_from(os.environ.get(LOG_MAX_BYTES_ENV))
    handler = PrivateRotatingFileHandler(path, maxBytes=size, backupCount=BACKUPS,
                                         encoding="utf-8")
    logging.basicConfig(handlers=[handler], level=logging.INFO, format=fmt)
    if problem is not None:
        logging.getLogger(__name__).warning("%s", problem)


def serve(opts: ServeOptions, on_listening: Callable[[str, str], None]) -> None:
    """Serve until a signal; ``on_listening(url, pubkey_b64)`` is called once it accepts.

    Raises:
        UsageError: an option no relay can run with (:func:`check_options`).
    """
    check_options(opts)
    _configure_logging(opts.log_file)
    data = (opts.data or relay_data_dir()).expanduser().absolute()
    config = with_hello_timeout(relay_config(opts), os.environ.get(HELLO_TIMEOUT_ENV))
    context = _ssl_context(opts)
    prepare_data_dir(data)
    key = load_or_create_key(data)
    storage, server = _open_server(opts, bytes(key), config, data)
    _tune_gc()
    pubkey = base64.b64encode(bytes(key.verify_key)).decode()
    try:
        trio.run(_serve_until_signal, server, opts, context, lambda url: on_listening(url, pubkey))
    finally:
        storage.close()
