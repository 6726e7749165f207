"""A minimal WebSocket client for load generators: one TCP stream, frames parsed in place.

trio-websocket costs its client about 40 us of CPU per frame received here (a reader task
feeding wsproto's generators and a memory channel that wakes the task calling ``get_message``).
With all of a benchmark's clients in one process, that process, not the server, was the bound:
500 clients in rooms of 20 receive 20 frames per op. :class:`LoadSocket` reads whatever the
socket has and splits it into frames in the calling task, with no task of its own, so a caller
that counts frames can look at each payload as bytes and decode only what it needs.

It speaks just what a load generator meets: text frames (masked, as RFC 6455 requires of a
client), unfragmented frames from the server, a ping answered with a pong, a close ending it.
``get_message`` and ``send_message`` have trio-websocket's names, so the test relay client's
handshake and requests (``tests.relay.client``) run over it unchanged.
"""

from __future__ import annotations

import base64
import os

import trio
from trio_websocket import ConnectionClosed

TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA
_HEAD_MAX = 16_384


class _Closed:
    """What ``ConnectionClosed`` carries: the reason the server gave (the code alone here)."""

    def __init__(self, code: int, payload: bytes = b"") -> None:
        self.code = code
        self.reason = payload[2:].decode(errors="replace")

    def __repr__(self) -> str:
        return f"<close {self.code} {self.reason!r}>"


def _header(opcode: int, size: int) -> bytes:
    if size < 126:
        return bytes((0x80 | opcode, 0x80 | size))
    if size < 1 << 16:
        return bytes((0x80 | opcode, 0x80 | 126)) + size.to_bytes(2, "big")
    return bytes((0x80 | opcode, 0x80 | 127)) + size.to_bytes(8, "big")


class LoadSocket:
    """One client WebSocket to ``/ws`` over a trio stream; use :func:`open_load_socket`."""

    def __init__(self, stream: trio.abc.Stream, buffered: bytes) -> None:
        self._stream = stream
        self._buffer = bytearray(buffered)
        self._mask = os.urandom(4)
        self._mask_int = int.from_bytes(self._mask * 64, "big")  # covers 256-byte payloads
        self._pending: list[bytes] = []  # payloads parsed but not yet handed out
        self.closed = False

    def frame(self, payload: bytes, opcode: int = TEXT) -> bytes:
        """``payload`` as one whole masked frame, ready for :meth:`send_raw`."""
        size = len(payload)
        if size <= 256:
            key = self._mask_int >> (8 * (256 - size))
        else:
            key = int.from_bytes((self._mask * (size // 4 + 1))[:size], "big")
        masked = (int.from_bytes(payload, "big") ^ key).to_bytes(size, "big")
        return _header(opcode, size) + self._mask + masked

    async def send_raw(self, data: bytes) -> None:
        """Write frames made by :meth:`frame` (several joined are one write)."""
        if self.closed:
            raise ConnectionClosed(_Closed(1006))  # type: ignore[arg-type]
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.closed = True
            raise ConnectionClosed(_Closed(1006)) from None  # type: ignore[arg-type]

    async def send_message(self, text: str) -> None:
        await self.send_raw(self.frame(text.encode()))

    async def receive_payloads(self) -> list[bytes]:
        """The text payloads of every whole frame the next read completes (at least one)."""
        if self._pending:
            out, self._pending = self._pending, []
            return out
        if self._buffer:  # what came with the handshake's answer, or a frame read in part
            out = await self._split()
            if out:
                return out
        while True:
            try:
                data = await self._stream.receive_some(1 << 16)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            if not data:
                self.closed = True
                raise ConnectionClosed(_Closed(1006))  # type: ignore[arg-type]
            self._buffer += data
            out = await self._split()
            if out:
                return out

    async def _split(self) -> list[bytes]:
        buf, out, at = self._buffer, [], 0
        end = len(buf)
        while end - at >= 2:
            first, second = buf[at], buf[at + 1]
            if first & 0x80 == 0 or second & 0x80:
                raise AssertionError("the server fragmented or masked a frame")
            size, start = second, at + 2
            if size == 126:
                if end - start < 2:
                    break
                size, start = int.from_bytes(buf[start:start + 2], "big"), start + 2
            elif size == 127:
                if end - start < 8:
                    break
                size, start = int.from_bytes(buf[start:start + 8], "big"), start + 8
            if end - start < size:
                break
            payload, at = bytes(buf[start:start + size]), start + size
            opcode = first & 0x0F
            if opcode == TEXT:
                out.append(payload)
            elif opcode == PING:
                await self.send_raw(self.frame(payload, PONG))
            elif opcode == CLOSE:
                self.closed = True
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
                raise ConnectionClosed(_Closed(code, payload))  # type: ignore[arg-type]
        del buf[:at]
        return out

    async def get_message(self) -> str:
        """The next text message, decoded (for requests; a counting loop reads payloads)."""
        payloads = await self.receive_payloads()
        first, rest = payloads[0], payloads[1:]
        self._pending = rest + self._pending
        return first.decode()

    async def aclose(self) -> None:
        """Send a close frame (unless the socket does not take it, or a task is writing to it
        now) and close the stream."""
        if not self.closed:
            self.closed = True
            with trio.move_on_after(1):
                try:
                    await self._stream.send_all(self.frame((1000).to_bytes(2, "big"), CLOSE))
                except (trio.BrokenResourceError, trio.ClosedResourceError,
                        trio.BusyResourceError):
                    pass  # the stream's close ends the connection all the same
        await self._stream.aclose()


async def open_load_socket(port: int, host: str = "127.0.0.1") -> LoadSocket:
    """Connect to ``ws://host:port/ws`` and complete the opening handshake."""
    stream = await trio.open_tcp_stream(host, port)
    try:
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET /ws HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   "Sec-WebSocket-Version: 13\r\n\r\n")
        await stream.send_all(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = await stream.receive_some(4096)
            if not data or len(head) > _HEAD_MAX:
                raise ConnectionError("the server closed during the WebSocket handshake")
            head += data
        head, rest = head.split(b"\r\n\r\n", 1)
        if not head.startswith(b"HTTP/1.1 101"):
            raise ConnectionError(f"no WebSocket upgrade: {head[:60]!r}")
    except BaseException:
        await stream.aclose()
        raise
    return LoadSocket(stream, rest)
