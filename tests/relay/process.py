"""The real relay as a subprocess (``python -m crosstalk relay serve --port 0 --json``)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class RelayProcess:
    """Start, kill and restart one relay on a data directory; always stopped by pid."""

    def __init__(self, data: Path, stderr_path: Path, *extra: str, tree: Path = ROOT,
                 env: dict[str, str] | None = None) -> None:
        """``tree``: the source tree the relay runs from (a bench may compare two); ``env``: on
        top of ours (``CROSSTALK_RELAY_PING``, say)."""
        self.data = data
        self.env = env or {}
        self.stderr_path = stderr_path
        self.extra = extra
        self.tree = tree
        self.proc: subprocess.Popen[str] | None = None
        self.port = 0
        self.url = ""
        self.pubkey = ""

    def start(self, timeout: float = 20.0) -> None:
        args = [sys.executable, "-m", "crosstalk", "relay", "serve", "--host", "127.0.0.1",
                "--port", "0", "--data", str(self.data), "--json", *self.extra]
        stderr = open(self.stderr_path, "a")  # handed to the child, closed below
        try:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                         cwd=self.tree,  # python -m imports from here first
                                         env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"})
        finally:
            stderr.close()
        line = self._first_line(timeout)
        info = json.loads(line)
        if "error" in info:  # it said why in one sentence, and exited
            self.kill()
            raise RuntimeError(f"relay did not start: {info['error']['message']}")
        self.url = str(info["listening"])
        self.port = int(self.url.rsplit(":", 1)[1])
        self.pubkey = info["pubkey"]

    def _first_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                    line = self.proc.stdout.readline()
                    if line:
                        return line
                    break
                if self.proc.poll() is not None:
                    break
        self.kill()
        raise RuntimeError(f"relay did not start; stderr: {self.stderr_path.read_text()[-2000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> int | None:
        """Signal the relay by pid and wait (bounded) for it; returns its exit status."""
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            os.kill(proc.pid, sig)
        try:
            return proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            return proc.wait(timeout=10)
        finally:
            if proc.stdout is not None:
                proc.stdout.close()
