"""A standard-library-only client for the daemon's control socket.

The hook program and the CLI use this; both are short-lived processes that must never hang,
so every socket operation runs under one overall deadline. The protocol (DESIGN §9): one JSON
object per line; request ``{"v": 1, "op": ...}``, reply ``{"ok": true, ...}`` or
``{"ok": false, "error": {"code", "message"}}``.
"""

from __future__ import annotations

import json
import os
import time

try:
    # The C module under ``socket``: ``socket.py`` itself (its IntEnum tables, ``selectors``,
    # ``array``) is about 1.7 ms of every hook's start-up on this machine (CPU, interleaved),
    # and a unix stream socket needs none of it. Any CPython and PyPy have ``_socket``.
    import _socket as socket
except ImportError:  # pragma: no cover - an interpreter without it
    import socket  # type: ignore[no-redef]

from crosstalk.errors import CrosstalkError, DaemonUnreachable, TooLarge

TYPE_CHECKING = False  # typing costs the hook start-up time; only the type checker reads these
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

PROTOCOL_VERSION = 1
MAX_REPLY = 16 * 1024 * 1024
#: The daemon refuses a longer request line (``crosstalk.wire.control.MAX_REQUEST_BYTES``; a
#: test keeps the two equal). Checked here so an oversized request is ``too_large`` before any
#: byte is written, not a broken pipe when the daemon hangs up mid-line.
MAX_REQUEST = 1024 * 1024


class ControlConnection:
    """One connection to the daemon, usable for several requests or a subscription."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float) -> None:
        self._deadline = time.monotonic() + timeout
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._buffer = b""
        try:
            self._sock.settimeout(self._remaining())
            self._sock.connect(os.fspath(path))
        except OSError as exc:
            self._sock.close()
            raise DaemonUnreachable(
                f"The crosstalk daemon is not answering on {path} ({exc.strerror or exc})."
            ) from None

    def __enter__(self) -> ControlConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def extend_deadline(self, seconds: float | None) -> None:
        """Allow ``seconds`` more from now (None: no deadline, for subscriptions)."""
        self._deadline = float("inf") if seconds is None else time.monotonic() + seconds

    def _remaining(self) -> float | None:
        if self._deadline == float("inf"):
            return None
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DaemonUnreachable("The crosstalk daemon did not answer in time.")
        return left

    def send(self, op: str, params: Mapping[str, Any] | None = None) -> None:
        """Send one request line."""
        line = json.dumps({"v": PROTOCOL_VERSION, "op": op, **(params or {})}) + "\n"
        if len(line.encode("utf-8", "surrogatepass")) > MAX_REQUEST:
            raise TooLarge(
                f"The request is larger than {MAX_REQUEST // 1024} KiB: send less text, or "
                "attach what is large as a slice (file:PATH, diff)."
            )
        try:
            self._sock.settimeout(self._remaining())
            self._sock.sendall(line.encode())
        except OSError as exc:
            raise DaemonUnreachable(f"Lost the connection to the daemon ({exc}).") from None

    def receive(self) -> dict[str, Any]:
        """Read one reply line and return it as a dict; raise the error it carries."""
        while b"\n" not in self._buffer:
            try:
                self._sock.settimeout(self._remaining())
                chunk = self._sock.recv(65536)
            except TimeoutError:
                raise DaemonUnreachable("The crosstalk daemon did not answer in time.") from None
            except OSError as exc:
                raise DaemonUnreachable(f"Lost the connection to the daemon ({exc}).") from None
            if not chunk:
                raise DaemonUnreachable("The daemon closed the connection before answering.")
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY:
                raise DaemonUnreachable("The daemon sent a reply that is too large.")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return _check_reply(line)

    def stream(self) -> Iterator[dict[str, Any]]:
        """Yield pushed lines until the daemon closes the connection."""
        while True:
            try:
                yield self.receive()
            except DaemonUnreachable:
                return


def _check_reply(line: bytes) -> dict[str, Any]:
    try:
        reply = json.loads(line)
    except ValueError:
        raise DaemonUnreachable("The daemon sent a reply that is not JSON.") from None
    if not isinstance(reply, dict):
        raise DaemonUnreachable("The daemon sent a reply that is not a JSON object.")
    if reply.get("ok") is False:
        error = reply.get("error") or {}
        raise CrosstalkError(
            str(error.get("message", "The daemon refused the request.")),
            code=str(error.get("code", "internal")),
        )
    return reply


def request(
    path: str | os.PathLike[str],
    op: str,
    params: Mapping[str, Any] | None = None,
    *,
    timeout: float = 10.0,
) -> dict[str, Any]:
    """Send one request and return its reply, all within ``timeout`` seconds."""
    with ControlConnection(path, timeout=timeout) as conn:
        conn.send(op, params)
        return conn.receive()
