"""The stand-in as a subprocess, for tests that point a real client at it, and its log reader.

``StandinProcess`` starts ``python -m tests.clients.standin`` from the repository root, reads the
``{"listening": URL}`` line under a deadline, and always stops the server by its pid.
``read_log`` turns the JSONL request log into ``LoggedRequest`` records.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import attrs

from tests.clients.script import Api, ToolName
from tests.clients.turns import offered_tools, strings_in

ROOT = Path(__file__).resolve().parents[2]


@attrs.frozen
class LoggedRequest:
    """One request as the stand-in logged it (secrets already removed)."""

    api: str | None
    method: str
    path: str
    headers: Mapping[str, str] = attrs.field(eq=False, hash=False)
    body: object = attrs.field(eq=False, hash=False)
    step: int | None = None

    def contains(self, needle: str) -> bool:
        """Whether any string anywhere in the JSON body contains ``needle``."""
        return any(needle in text for text in strings_in(self.body))

    def tools(self) -> tuple[ToolName, ...]:
        """The tools this request offered the model (none for a request outside the four APIs)."""
        return offered_tools(Api(self.api), self.body) if self.api is not None else ()


def read_log(path: Path) -> list[LoggedRequest]:
    """All requests logged so far, oldest first (an absent log is an empty one)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        records.append(LoggedRequest(raw["api"], raw["method"], raw["path"], raw["headers"],
                                     raw["body"], raw["step"]))
    return records


class StandinProcess:
    """One stand-in server process; a context manager that stops it by pid on exit."""

    def __init__(self, log: Path, *, script: Path | None = None, lifetime: float = 600.0,
                 stderr_path: Path | None = None) -> None:
        self.log = log.resolve()  # the child runs in ROOT
        self.script = script.resolve() if script is not None else None
        self.lifetime = lifetime
        self.stderr_path = stderr_path or log.with_suffix(".stderr")
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> StandinProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The server's process id."""
        assert self.proc is not None, "not started"
        return self.proc.pid

    def start(self, timeout: float = 20.0) -> str:
        """Start the server and return its base URL once it listens (or raise after timeout)."""
        args = [sys.executable, "-m", "tests.clients.standin", "--port", "0", "--log",
                str(self.log), "--lifetime", str(self.lifetime)]
        if self.script is not None:
            args += ["--script", str(self.script)]
        with open(self.stderr_path, "a", encoding="utf-8") as stderr:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                         cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        line = self._stdout_line(timeout)
        if line is None:
            self.stop()
            raise RuntimeError(f"stand-in did not start: {self.stderr_path.read_text()[-2000:]}")
        self.url = str(json.loads(line)["listening"])
        return self.url

    def _stdout_line(self, timeout: float) -> str | None:
        """The next stdout line, or None if none came before the deadline or the process died."""
        assert self.proc is not None and self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if selector.select(timeout=left):
                    return self.proc.stdout.readline() or None
        return None

    def wait_exited(self, timeout: float) -> tuple[int, str]:
        """Wait (bounded) for the server to exit by itself; its status and remaining stdout."""
        assert self.proc is not None and self.proc.stdout is not None
        status = self.proc.wait(timeout=timeout)
        rest = self.proc.stdout.read()
        self._forget()
        return status, rest

    def stop(self) -> int | None:
        """SIGTERM the server by pid and wait for it (SIGKILL if it lingers); its status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            status = self.proc.wait(timeout=10)
        self._forget()
        return status

    def requests(self) -> list[LoggedRequest]:
        """The requests logged so far."""
        return read_log(self.log)

    def _forget(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.stdout is not None:
            proc.stdout.close()

