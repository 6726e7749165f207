"""The relay a daemon uses, and the local one it starts when none is configured.

Order: ``CROSSTALK_RELAY`` (the environment the daemon was started with), then the relay saved in
the store (set by pairing: the invite's relay), then the local relay on loopback at the
well-known port. The local relay runs as its own background process with its data in a per-user
directory, so every identity on this machine meets on the same one, and it outlives any daemon.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from crosstalk.errors import RelayUnreachable
from crosstalk.paths import RELAY_ENV

LOCAL_PORT = 8787
LOCAL_RELAY = f"ws://127.0.0.1:{LOCAL_PORT}"
START_TIMEOUT = 20.0


def configured_relay(saved: str | None) -> str:
    """The relay URL to use: environment, then the saved one, then the local relay."""
    return os.environ.get(RELAY_ENV) or saved or LOCAL_RELAY


def is_local_default(url: str) -> bool:
    return url.rstrip("/") == LOCAL_RELAY


def ensure_local_relay(data_dir: Path | None = None) -> None:
    """Start the local relay unless something already answers on its port.

    Blocking (a subprocess and a bounded health poll): call it from a worker thread.
    """
    from crosstalk.cli.cmd_relay import check_health
    from relay.main import default_data_dir

    if check_health(LOCAL_RELAY, timeout=1.0):
        return
    data = data_dir or default_data_dir()
    data.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = str(data / "relay.log")
    # Its own session, so it outlives this daemon and ignores our terminal's signals. (Were it to
    # exit first it would linger as a zombie until we exit: harmless, and it should not exit.)
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "crosstalk", "relay", "serve", "--port", str(LOCAL_PORT),
         "--data", str(data)],
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setsid=True,
    )
    deadline = time.monotonic() + START_TIMEOUT
    while not check_health(LOCAL_RELAY, timeout=1.0):
        if time.monotonic() > deadline:
            raise RelayUnreachable(
                f"The local relay did not start on port {LOCAL_PORT}; see {data / 'relay.log'}."
            )
        time.sleep(0.1)
