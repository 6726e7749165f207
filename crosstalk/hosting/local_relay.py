"""The relay a daemon uses, and the local one it starts when none is configured.

Order: ``CROSSTALK_RELAY`` (the environment the daemon was started with), then the relay saved in
the store (set by pairing: the invite's relay), then the local relay on loopback at the
well-known port. The local relay runs as its own background process with its data in a per-user
directory, so every identity on this machine meets on the same one, and it outlives any daemon.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from crosstalk.errors import NoLanAddress, RelayUnreachable
from crosstalk.paths import RELAY_ENV, relay_data_dir

# The well-known port every identity on this machine meets on (CROSSTALK_LOCAL_PORT moves it,
# so tests never touch a relay someone is using).
LOCAL_PORT = int(os.environ.get("CROSSTALK_LOCAL_PORT", "8787"))
LOCAL_RELAY = f"ws://127.0.0.1:{LOCAL_PORT}"
HOSTED_PORT = 8788  # `room new --host`: a relay others on the LAN can reach
HOST_ADDRESS_ENV = "CROSSTALK_HOST_ADDRESS"
HOST_PORT_ENV = "CROSSTALK_HOST_PORT"
START_TIMEOUT = 20.0


def configured_relay(saved: str | None) -> str:
    """The relay URL to use: environment, then the saved one, then the local relay."""
    return os.environ.get(RELAY_ENV) or saved or LOCAL_RELAY


def is_local_default(url: str) -> bool:
    return url.rstrip("/") == LOCAL_RELAY


def lan_address() -> str:
    """This machine's LAN address for ``--host`` (``CROSSTALK_HOST_ADDRESS`` overrides)."""
    chosen = os.environ.get(HOST_ADDRESS_ENV)
    if chosen:
        return chosen
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)
    except OSError:
        infos = []
    for info in infos:
        address = str(info[4][0])
        if not address.startswith("127."):
            return address
    raise NoLanAddress(
        "This machine has no LAN address that others could reach; set "
        f"{HOST_ADDRESS_ENV} to the address to use."
    )


def hosted_port() -> int:
    raw = os.environ.get(HOST_PORT_ENV)
    return int(raw) if raw and raw.isdigit() else HOSTED_PORT


def ensure_local_relay(data_dir: Path | None = None) -> int | None:
    """Start the local relay on loopback unless something already answers on its port.

    Blocking (a subprocess and a bounded health poll): call it from a worker thread. Returns
    the pid of the relay it started (our child, for :func:`reap` once it exits), or None.
    """
    return ensure_relay_at("127.0.0.1", LOCAL_PORT, data_dir)


def ensure_relay_at(
    host: str, port: int, data_dir: Path | None = None, *, behind_tunnel: bool = False
) -> int | None:
    """Start a relay listening on ``host:port`` unless one already answers there.

    ``behind_tunnel``: the relay is for the tunnel this machine starts in front of it, so it
    takes clients' addresses from the tunnel's header (``relay serve --behind-tunnel``).
    """
    url = f"ws://{host}:{port}"
    if check_health(url, timeout=1.0):
        return None
    data = data_dir or (
        relay_data_dir() if port == LOCAL_PORT else relay_data_dir().with_name(f"relay-{port}")
    )
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    # One starter at a time: every daemon on the machine may find the relay gone at once; the
    # first to take the lock starts it, the others then find it answering.
    with open(data / "relay.start.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if check_health(url, timeout=1.0):
            return None
        return _spawn_relay(host, port, data, behind_tunnel, check_health)


def _spawn_relay(
    host: str, port: int, data: Path, behind_tunnel: bool, check_health: Callable[..., bool]
) -> int:
    url = f"ws://{host}:{port}"
    # The relay writes its log itself, rotated (--log-file); its stdout (the listening line)
    # and stderr (a crash's traceback) go to relay.out, which stays small.
    out = str(data / "relay.out")
    # Its own session, so it outlives this daemon and ignores our terminal's signals. (Were it to
    # exit first it would linger as a zombie until we exit: harmless, and it should not exit.)
    pid = os.posix_spawn(
        sys.executable,
        [
            sys.executable,
            "-m",
            "crosstalk",
            "relay",
            "serve",
            "--host",
            host,
            "--port",
            str(port),
            "--data",
            str(data),
            "--log-file",
            str(data / "relay.log"),
            *(["--behind-tunnel"] if behind_tunnel else []),
        ],
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    (data / "relay.pid").write_text(f"{pid}\n")  # so whoever needs to can stop it by pid
    deadline = time.monotonic() + START_TIMEOUT
    while not check_health(url, timeout=1.0):
        if time.monotonic() > deadline:
            raise RelayUnreachable(
                f"The relay did not start on {host}:{port}; see {data / 'relay.out'} and "
                f"{data / 'relay.log'}."
            )
        time.sleep(0.1)
    return pid


def reap(pid: int) -> bool:
    """Collect the exit status of a relay we started, if it has exited (until then a dead child
    lingers as a zombie for as long as this daemon runs). True once it is collected."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # not (or no longer) ours to collect
    return done == pid


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
