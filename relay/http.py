"""Plain HTTP beside the WebSocket on one port.

trio-websocket answers any request without ``Upgrade: websocket`` with a 400 before our handler
sees it, so the shell reads the request head itself first: an upgrade is handed to trio-websocket
through :class:`ReplayStream` (which gives back the bytes already read), anything else is a small
HTTP/1.1 exchange answered here (``GET /health``, ``GET /metrics``) and closed.

The same stream carries the shell's own writes beside trio-websocket's: :func:`text_frame`
encodes each frame once and :meth:`ReplayStream.send_all_if` writes a connection's queued
frames in one call, where ``send_message`` would write once per frame (a quarter of the relay's
time under fan-out went to those writes). Every write on the stream holds one lock, so bytes
from the two writers never interleave; :meth:`ReplayStream.send_now` writes without a task or a
scheduling round, and only while nobody holds that lock.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

import attrs
import trio

MAX_HEAD = 16 << 10


class HeadTooLarge(Exception):
    """The client sent more than 16 KiB without ending its request head."""


@attrs.frozen
class RequestHead:
    method: str
    path: str
    headers: dict[str, str]

    @property
    def is_upgrade(self) -> bool:
        return "websocket" in self.headers.get("upgrade", "").lower()


async def read_head(stream: trio.abc.Stream) -> tuple[RequestHead | None, bytes]:
    """Read up to the blank line; return the parsed head (None if unparseable) and every byte."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            raise HeadTooLarge
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None, data
        data += chunk
    return parse_head(data.split(b"\r\n\r\n", 1)[0]), data


def parse_head(raw: bytes) -> RequestHead | None:
    try:
        text = raw.decode("latin-1")
        request_line, *header_lines = text.split("\r\n")
        method, target, _version = request_line.split(" ", 2)
    except ValueError:
        return None
    headers: dict[str, str] = {}
    for line in header_lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return RequestHead(method, target.split("?", 1)[0], headers)


def response(status: int, reason: str, content_type: str, body: bytes) -> bytes:
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def text_frame(text: str) -> bytes:
    """``text`` as one unmasked, final WebSocket text frame: what a server sends (RFC 6455 5.2).

    Only valid on a connection that negotiated no extension: the relay accepts none, and a
    compressing extension would change every data frame.
    """
    payload = text.encode()
    size = len(payload)
    if size < 126:
        head = bytes((0x81, size))
    elif size < 1 << 16:
        head = struct.pack("!BBH", 0x81, 126, size)
    else:
        head = struct.pack("!BBQ", 0x81, 127, size)
    return head + payload


def _always() -> bool:
    return True


class ReplayStream(trio.abc.Stream):
    """A stream that first yields ``prefix`` (bytes already read), then reads from ``inner``.

    Writes are serialised by one lock, so the shell can write whole frames with
    :meth:`send_all_if` while trio-websocket writes its own (pongs, pings, the close frame).
    """

    def __init__(self, inner: trio.abc.Stream, prefix: bytes) -> None:
        self._inner = inner
        self._prefix = prefix
        self._writing = trio.StrictFIFOLock()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.send_all_if(data, _always)

    async def send_all_if(
        self, data: bytes | bytearray | memoryview, still_open: Callable[[], bool]
    ) -> bool:
        """Write ``data`` unless ``still_open()`` is false once the lock is ours; True if written.

        trio-websocket marks a connection closed *before* it writes the close frame, so asking
        under the lock guarantees no data frame follows a close frame (RFC 6455 5.5.1).
        """
        try:  # a free lock is taken without the scheduling round ``acquire`` adds; the
            self._writing.acquire_nowait()  # write below is this call's checkpoint
        except trio.WouldBlock:
            await self._writing.acquire()
        try:
            if not still_open():
                await trio.lowlevel.checkpoint()
                return False
            await self._inner.send_all(data)
            return True
        finally:
            self._writing.release()

    def send_now(self, data: bytes) -> int | None:
        """Write what the socket takes of ``data`` at once, without yielding: how many bytes
        went (0 if its buffer is full); None if this stream cannot (TLS, or a write holds the
        lock). The caller must send the rest, in order, before anything else.

        Raises OSError if the connection is broken.
        """
        inner = self._inner
        if self._writing.locked() or not isinstance(inner, trio.SocketStream):
            return None
        fd = inner.socket.fileno()  # -1 once closed: never write to a number reused since
        if fd < 0:
            return None
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            out, self._prefix = self._prefix[:size], self._prefix[size:]
            await trio.lowlevel.checkpoint()
            return out
        return await self._inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._inner.aclose()
