"""A fake daemon for hook tests: a real unix control socket served by a thread.

It answers each request line with ``{"ok": true, **replies[op](request)}`` and records every
request, or (``stall=True``) accepts and never answers, like a daemon that is stuck. A
``hook_event`` request (the hook's one op per event) is answered as the daemon answers it, from
the replies of the ops it stands for, and recorded as those ops (``requests``, ``ops()``); the
lines as sent are in ``lines``. Edits go to ``edits_touched``/``edits_check`` as the daemon
delegates them, when the table has those ops.
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
        self.lines: list[dict[str, Any]] = []
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
                    self.lines.append(request)
                if self.stall:
                    self._stop.wait(5.0)
                    return
                if request["op"] == "hook_event" and "hook_event" not in self.replies:
                    answer = self._hook_event(request)
                else:
                    answer = self._answer(request)
                stream.write((json.dumps({"ok": True, **answer}) + "\n").encode())
                stream.flush()

    def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.requests.append(request)
        handler = self.replies.get(request["op"])
        return handler(request) if handler is not None else {}

    def _hook_event(self, request: dict[str, Any]) -> dict[str, Any]:
        """``hook_event`` as ``crosstalk.features.attention.sessions`` answers it, op by op."""
        fields = ("name", "client", "project", "inbox_socket", "transcript_path")
        register = {"v": 1, "op": "session_register"}
        register.update({k: request[k] for k in fields if k in request})
        reply: dict[str, Any] = {"session": self._answer(register)}
        name = request["name"]
        if request.get("status") is not None:
            status = {"v": 1, "op": "session_status", "name": name, "status": request["status"]}
            self._answer(status)
        if request.get("working_set"):
            asked = {"v": 1, "op": "working_set", "session": name, "cwd": request.get("cwd")}
            reply["working_set"] = self._answer(asked).get("text")
        if request.get("notices"):
            asked = {"v": 1, "op": "notices", "session": name, "pending": True, "words": True}
            reply["notices"] = self._answer(asked).get("notices")
        for key, op in (("edited", "edits_touched"), ("editing", "edits_check")):
            if request.get(key) and op in self.replies:
                asked = {"v": 1, "op": op, "session": name, "cwd": request.get("cwd"),
                         "paths": request[key]}
                answer = self._answer(asked)
                if op == "edits_check":
                    reply["edit_warning"] = answer or None
        return reply

    def ops(self) -> list[str]:
        with self._lock:
            return [r["op"] for r in self.requests]

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)
