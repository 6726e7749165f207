"""The relay link's socket side: open connections when told, read, write, ping, report.

The :class:`Dialer` is the relay-link actor's I/O half. It decides nothing: it opens a connection
each time the driver says :class:`Dial <crosstalk.core.link.events.Dial>`, and per connection runs

* a reader: each frame goes to the driver's input channel as :class:`FrameIn` (a full channel
  stops the reader: that is the backpressure on a flood), and proves we are alive (a beat);
* the writer, the only task that sends: it drains the connection's frame channel, each send
  under ``send_timeout`` (one cancel scope, armed only while a frame is being sent); a
  :class:`Close` in that channel ends the connection with its reason;
* a pinger: ``ws.ping()`` under ``ping_timeout`` every ``ping_interval``, a beat per pong.

It reports :class:`Opened` (with the connection's frame channel) and, once the connection is
closed, :class:`Closed` with the first reason it ended for. Waits that carry their own bound
(connect, close) are announced to the :class:`Vouch`, which beats for them; if one overran its
bound the beats would stop and the supervisor's watchdog would restart the actor.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import attrs
import trio

from crosstalk.actors.relay_link_api import LinkTimings
from crosstalk.errors import CrosstalkError, RelayKeyMismatch, RemoteProtocolError
from crosstalk.wire.relay import MAX_FRAME
from crosstalk.wire.websocket import late_pongs_ignored

log = logging.getLogger(__name__)

WRITE_BUFFER = 64
"""Frames the driver may hand one connection's writer before it waits for the socket."""


class RelaySocket(Protocol):
    """What the link needs of a WebSocket (trio-websocket's connection, or a test fake)."""

    async def get_message(self) -> str | bytes: ...

    async def send_message(self, message: str) -> None: ...

    async def ping(self) -> None: ...


Connector = Callable[[str, LinkTimings], AbstractAsyncContextManager[RelaySocket]]


@asynccontextmanager
async def open_relay_socket(url: str, timings: LinkTimings) -> AsyncIterator[RelaySocket]:
    """The real connector: ``url + "/ws"``, with both timeouts set (platform-notes §3)."""
    await import_websocket()
    from trio_websocket import open_websocket_url

    opened = None
    try:
        with late_pongs_ignored():  # a ping that crossed our close frame is no fault
            async with open_websocket_url(
                url.rstrip("/") + "/ws",
                connect_timeout=timings.connect_timeout,
                disconnect_timeout=timings.disconnect_timeout,
                max_message_size=MAX_FRAME + 4096,
            ) as ws:
                opened = ws
                yield ws
    finally:
        # trio-websocket 0.12 leaks the TCP stream when the peer vanishes: its reader marks the
        # connection aborted (close code 1006) without closing the stream, and aclose() then
        # returns early because a close reason is already set. Close it ourselves (idempotent).
        stream = getattr(opened, "_stream", None)
        if isinstance(stream, trio.abc.AsyncResource):
            await trio.aclose_forcefully(stream)


class ConnectionDropped(Exception):
    """The driver closed the connection (the relay broke the protocol, showed another key, or
    did not finish the handshake in time); ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def import_websocket() -> None:
    """Import trio-websocket on a worker thread, once, so the event loop keeps serving.

    With wsproto and h11 (whose regular expressions compile at import) it was a sixth of the
    daemon's import, before any relay was dialled; a daemon with no relay never needs it.
    """
    if "trio_websocket" not in sys.modules:
        await trio.to_thread.run_sync(importlib.import_module, "trio_websocket")


def link_errors() -> tuple[type[BaseException], ...]:
    """What ends one connection (and is retried).

    Anything else (a store error, a closed events channel, a bug) crashes the actor, and the
    supervisor restarts it. trio-websocket turns a broken stream into ConnectionClosed, so trio's
    own Broken/ClosedResourceError are not listed here. A function, not a constant, so that
    trio-websocket is imported only once a connection is tried (an ``except`` clause evaluates
    it only when an exception is raised).
    """
    from trio_websocket import ConnectionClosed, HandshakeError

    return (
        HandshakeError, ConnectionClosed, OSError, trio.TooSlowError, RemoteProtocolError,
        RelayKeyMismatch, ConnectionDropped,
    )


def describe(exc: BaseException) -> str:
    """Why a connection ended, in words for ``status`` and the log."""
    from trio_websocket import ConnectionClosed, HandshakeError

    if isinstance(exc, ConnectionDropped):
        return exc.reason
    if isinstance(exc, CrosstalkError):
        return exc.message
    if isinstance(exc, ConnectionClosed):
        return "the relay closed the connection"
    if isinstance(exc, HandshakeError) and exc.__cause__ is not None:
        return f"cannot connect ({exc.__cause__})"
    return f"{type(exc).__name__}: {exc}".rstrip(": ") or type(exc).__name__


# --- what the dialer tells the driver (on the driver's one input channel) -------------------------


@attrs.frozen
class Close:
    """In a connection's frame channel: end the connection for ``reason`` (after what is queued)."""

    reason: str


# Each carries ``source``, the dialer that reports it: the inbox they share with the commands
# outlives the actor's instances, and a new instance drops what its predecessor's dialer left.


@attrs.frozen(eq=False)
class Opened:
    """A connection is open; ``frames`` feeds its writer (closed when the connection ends)."""

    frames: trio.MemorySendChannel[str | Close]
    source: object = None


@attrs.frozen
class FrameIn:
    """One frame read from the relay."""

    text: str | bytes
    source: object = None


@attrs.frozen
class Closed:
    """The connection (or the attempt to open one) ended, for ``reason``."""

    reason: str
    source: object = None


SocketInput = Opened | FrameIn | Closed


class Vouch:
    """Beats for the actor through waits that carry their own bound (see the module docstring)."""

    def __init__(self, beat: Callable[[], None]) -> None:
        self._beat = beat
        self._until = -1.0

    def bound(self, seconds: float) -> None:
        """A wait bounded by ``seconds`` starts now: beat, and keep beating until it is over."""
        self._beat()
        self._until = trio.current_time() + seconds

    def clear(self) -> None:
        """From now on, frames and pongs prove we are alive."""
        self._until = -1.0

    async def run(self, heartbeat: float) -> None:
        while True:
            await trio.sleep(heartbeat / 2)
            if trio.current_time() <= self._until:
                self._beat()


class Dialer:
    """Opens one connection per dial order and serves it (see the module docstring)."""

    def __init__(
        self,
        *,
        url: str,
        timings: LinkTimings,
        connect: Connector,
        inputs: trio.MemorySendChannel[SocketInput],
        vouch: Vouch,
        beat: Callable[[], None],
    ) -> None:
        self._url = url
        self._t = timings
        self._connect = connect
        self._inputs = inputs
        self._vouch = vouch
        self._beat = beat

    async def run(self, dials: trio.MemoryReceiveChannel[None]) -> None:
        """One connection per dial order, each reported closed once it is."""
        async for _ in dials:
            reason = await self._one_connection()
            await self._inputs.send(Closed(reason, self))

    async def _one_connection(self) -> str:
        """Connect, serve one connection until it fails, close it; return why it ended."""
        t = self._t
        self._vouch.bound(t.connect_timeout)
        ended: list[str] = []  # why, first reason first (closing may fail too, afterwards)
        try:
            async with self._connect(self._url, t) as ws:
                self._beat()
                send, receive = trio.open_memory_channel[str | Close](WRITE_BUFFER)
                await self._inputs.send(Opened(send, self))
                async with receive, trio.open_nursery() as nursery:
                    for task in (self._reader, self._pinger):
                        nursery.start_soon(self._guard, task(ws), nursery.cancel_scope, ended)
                    writer = self._writer(ws, receive)
                    nursery.start_soon(self._guard, writer, nursery.cancel_scope, ended)
                self._vouch.bound(t.disconnect_timeout)
        except link_errors() as exc:
            if isinstance(exc, RelayKeyMismatch):
                log.warning("relay link: %s", exc.message)
            ended.append(describe(exc))
        self._beat()
        return ended[0] if ended else "the connection ended"

    async def _guard(
        self, task: Awaitable[None], scope: trio.CancelScope, ended: list[str]
    ) -> None:
        """Run one connection task; its end (or failure) ends the whole connection."""
        try:
            await task
        except link_errors() as exc:
            ended.append(describe(exc))
        scope.cancel()

    async def _reader(self, ws: RelaySocket) -> None:
        while True:
            text = await ws.get_message()
            self._beat()
            await self._inputs.send(FrameIn(text, self))

    async def _writer(
        self, ws: RelaySocket, frames: trio.MemoryReceiveChannel[str | Close]
    ) -> None:
        # One cancel scope for the connection's life, armed (``send_timeout``) only while a
        # frame is being sent and disarmed once the channel is drained: entering and leaving a
        # scope per frame was a measurable part of each send's scheduling cost.
        limit = self._t.send_timeout
        with trio.CancelScope() as bound:
            while True:
                try:
                    batch = [await frames.receive()]
                except trio.EndOfChannel:
                    return  # the driver let go of this connection
                while True:
                    try:
                        batch.append(frames.receive_nowait())
                    except trio.WouldBlock:
                        break
                for item in batch:
                    if isinstance(item, Close):
                        raise ConnectionDropped(item.reason)
                    bound.deadline = trio.current_time() + limit
                    await ws.send_message(item)
                bound.deadline = math.inf
        raise trio.TooSlowError(f"a frame to the relay took longer than {limit:g} s to send")

    async def _pinger(self, ws: RelaySocket) -> None:
        while True:
            await trio.sleep(self._t.ping_interval)
            try:
                with trio.fail_after(self._t.ping_timeout):
                    await ws.ping()
            except trio.TooSlowError:
                raise trio.TooSlowError(
                    f"no pong from the relay within {self._t.ping_timeout:g} s"
                ) from None
            self._beat()
