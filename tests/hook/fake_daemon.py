"""A fake daemon for hook tests: a real unix control socket served by a thread.

It answers each request line with ``{"ok": true, **replies[op](request)}`` and records every
request, or (``stall=True``) accepts and never answers, like a daemon that is stuck.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

Reply = Callable[[dict[str, Any]], dict[str, Any]]


class FakeDaemon:
    """A control socket that answers each request line with ``replies[op](request)``."""

    def __init__(self, path: Path, replies: dict[str, Reply], *, stall: bool = False) -> None:
        self.path = path
        self.replies = replies
        self.stall = stall
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(5.0)
        with conn, conn.makefile("rwb") as stream:
            for line in stream:
                request = json.loads(line)
                with self._lock:
                    self.requests.append(request)
                if self.stall:
                    self._stop.wait(5.0)
                    return
                handler = self.replies.get(request["op"])
                answer = handler(request) if handler is not None else {}
                stream.write((json.dumps({"ok": True, **answer}) + "\n").encode())
                stream.flush()

    def ops(self) -> list[str]:
        with self._lock:
            return [r["op"] for r in self.requests]

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)
