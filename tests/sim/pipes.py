"""In-memory byte streams between a node and the relay, with the network's faults in them.

A connection is two :class:`Pipe` s (one per direction) seen through two :class:`PipeEnd` s,
each a ``trio.abc.Stream``: the relay's shell reads the HTTP head and runs trio-websocket on
one, the node's trio-websocket client runs on the other (simulation.md §2, "byte tier"). So
every frame crosses the real WebSocket framing, pings and close handshakes of both sides.

Faults live in the pipe: a per-node one-way delay, read when bytes are written, FIFO (bytes are
never delivered before bytes written before them: TCP does not reorder); a hold (the relay is
frozen, or the node's link is half-open: nothing moves until it is lifted); an end of stream
after what is queued (a drop); and a reset (a crash: whatever is queued is lost, both ends see
the end at once). A pipe holds at most ``WINDOW`` bytes not yet read, as TCP's buffers do: a
writer to a peer that does not read waits, so the relay's outbox and write timeout see it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import trio

WINDOW = 1 << 16  # bytes written and not yet read before a writer waits


class Pipe:
    """One direction of one connection: chunks due at a virtual time, in order."""

    def __init__(self, delay: Callable[[], float], held: Callable[[], bool]) -> None:
        self._delay = delay
        self._held = held
        self._chunks: deque[tuple[float, bytes]] = deque()
        self._due = 0.0  # when the last queued chunk arrives (the FIFO floor)
        self._lot = trio.lowlevel.ParkingLot()  # the reader, waiting for bytes
        self._room = trio.lowlevel.ParkingLot()  # writers, waiting for the window
        self._size = 0  # bytes queued
        self.ended = False  # the writer closed: the reader sees the end after what is queued
        self.reset = False  # broken: queued bytes are lost, the reader sees the end now
        self.deaf = False  # the reader closed: writing fails

    def write(self, data: bytes) -> None:
        if self.reset or self.deaf or self.ended:
            raise trio.BrokenResourceError("the connection is gone")
        self._due = max(self._due, trio.current_time() + self._delay())
        self._chunks.append((self._due, data))
        self._size += len(data)
        self._lot.unpark_all()

    async def wait_room(self) -> None:
        """Wait while the window is full (and the pipe still works)."""
        while self._size >= WINDOW and not (self.reset or self.deaf or self.ended):
            await self._room.park()

    def end(self) -> None:
        """No more bytes: the reader sees the end once it has read what is queued."""
        self.ended = True
        self._lot.unpark_all()
        self._room.unpark_all()

    def break_(self) -> None:
        """A reset: queued bytes are lost and both sides fail at once."""
        self.reset = True
        self._chunks.clear()
        self._lot.unpark_all()
        self._room.unpark_all()

    def wake(self) -> None:
        """Look again (the hold was lifted, or the reader went away)."""
        self._lot.unpark_all()
        self._room.unpark_all()

    async def read(self, max_bytes: int | None) -> bytes:
        while True:
            if self.reset or (self.ended and not self._chunks):
                await trio.lowlevel.checkpoint()
                return b""
            if self._chunks and not self._held():
                due, data = self._chunks[0]
                if due <= trio.current_time():
                    await trio.lowlevel.checkpoint()
                    if max_bytes is not None and len(data) > max_bytes:
                        self._chunks[0] = (due, data[max_bytes:])
                        data = data[:max_bytes]
                    else:
                        self._chunks.popleft()
                    self._size -= len(data)
                    self._room.unpark_all()
                    return data
                with trio.move_on_at(due):
                    await self._lot.park()
                continue
            await self._lot.park()


class PipeEnd(trio.abc.Stream):
    """One side of a connection: writes go out on ``out``, reads come in on ``into``."""

    def __init__(self, out: Pipe, into: Pipe) -> None:
        self._out = out
        self._into = into
        self._closed = False

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            raise trio.ClosedResourceError("this end is closed")
        await trio.lowlevel.checkpoint()
        await self._out.wait_room()
        self._out.write(bytes(data))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise trio.ClosedResourceError("this end is closed")
        return await self._into.read(max_bytes)

    async def aclose(self) -> None:
        self._close()
        await trio.lowlevel.checkpoint()

    def _close(self) -> None:
        if not self._closed:
            self._closed = True
            self._out.end()
            self._into.deaf = True
            self._into.wake()


def connection(delay: Callable[[], float], held: Callable[[], bool]
               ) -> tuple[PipeEnd, PipeEnd, tuple[Pipe, Pipe]]:
    """A new connection: (the node's end, the relay's end, both pipes)."""
    up, down = Pipe(delay, held), Pipe(delay, held)
    return PipeEnd(up, down), PipeEnd(down, up), (up, down)
