"""``room new --public``: a Cloudflare quick tunnel in front of a relay on this machine.

crosstalk never downloads ``cloudflared``: a tool whose claim is that it holds no key it should
not hold has no business fetching an executable for you. It must already be on PATH.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import subprocess
import time

from crosstalk.errors import Unavailable

START_TIMEOUT = 30.0
_URL = re.compile(r"https://([a-z0-9-]+\.trycloudflare\.com)")


def require_cloudflared() -> str:
    """The path of ``cloudflared``, or the plain sentence saying it is not there."""
    path = shutil.which("cloudflared")
    if path is None:
        raise Unavailable(
            "`room new --public` needs cloudflared on your PATH, and it is not there; "
            "crosstalk does not download it. Install it, or use --host on a shared network."
        )
    return path


def open_tunnel(port: int) -> tuple[str, subprocess.Popen[bytes]]:
    """Start a quick tunnel to ``127.0.0.1:port``; return its public host name and process.

    Blocking (reads cloudflared's output for at most START_TIMEOUT): call from a worker thread.
    The caller owns the process and stops it by pid.
    """
    binary = require_cloudflared()
    proc = subprocess.Popen(
        [binary, "tunnel", "--no-autoupdate", "--url", f"http://127.0.0.1:{port}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline and proc.poll() is None:
            if selector.select(max(0.0, deadline - time.monotonic())):
                seen += os.read(proc.stderr.fileno(), 65536)
                if match := _URL.search(seen.decode(errors="replace")):
                    return match.group(1), proc
    proc.kill()
    proc.wait(timeout=10)
    raise Unavailable(
        "cloudflared did not hand out a public address in time (quick tunnels are rate "
        "limited); try again, or use --host."
    )
