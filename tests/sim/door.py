"""The control socket in the simulation: each node's real control server over in-memory streams.

Every node runs the real :class:`~crosstalk.actors.control.ControlServer` behind the real
:class:`~crosstalk.actors.control_gate.OpGate`, as ``crosstalk daemon run`` does; only its
listener is swapped (``ControlServer(listen=...)``): :class:`Door` hands it
:class:`MemoryListener`, whose connections are trio memory stream pairs. So a sim client's op
goes through the same line framing, request parsing, dispatch, error replies and hang-up
handling as a CLI's, and :func:`request` is the client end: one request per connection, its
reply lines read until the op's last record, as the CLI reads them.

Two injection points live here (``World.hang_up`` and ``World.slow_reader`` draw them):

* a client that hangs up mid-request: it sends the request and closes its end a seeded number
  of scheduler steps later, reading nothing. The op may still run (the server finishes a
  request/reply op and finds nobody to answer: ``control.reply_undeliverable``) or be cut off
  (a stream op's hang-up cancels it: ``control.stream_hung_up``); the history says ``info``
  and the ``hangup`` checker (tests/sim/check_door.py) looks at which it was.
* a slow reader: its connection is a lockstep pair (nothing buffered: every server write waits
  for the client's read) and the client reads a few bytes at a time with pauses between.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
import trio.testing

from crosstalk.errors import CrosstalkError
from crosstalk.store.db import Store
from crosstalk.wire.control import PROTOCOL_VERSION

BACKLOG = 64  # connections waiting to be accepted, as the real listener's listen(64)
SLOW_BYTES, SLOW_PAUSE = 64, 0.02  # a slow reader's reads: bytes each, virtual seconds between
FINAL = {"ask": "answer", "room_new": "joined"}
"""A stream op's last record carries this field (the CLI stops reading there, as here)."""


class DaemonDown(Exception):
    """Nothing listens at the node's control socket (its daemon is down): connection refused."""


class HungUp(Exception):
    """The client hung up mid-request (an injected fault): the op's outcome is unknown to it."""


class Ended(Exception):
    """The daemon's end closed before the op's last reply line: its outcome is unknown."""


class MemoryListener(trio.abc.Listener[trio.abc.Stream]):
    """A listener whose connections are in-memory stream pairs (one per :meth:`connect`)."""

    def __init__(self, on_hangup: Callable[[], Awaitable[None]] | None = None) -> None:
        self._send, self._receive = trio.open_memory_channel[trio.abc.Stream](BACKLOG)
        self._on_hangup = on_hangup

    def connect(self, *, slow: bool) -> trio.abc.Stream:
        """The client end of a new connection; its server end waits to be accepted."""
        pair = trio.testing.lockstep_stream_pair if slow else trio.testing.memory_stream_pair
        client, server = pair()
        served: trio.abc.Stream = server
        if self._on_hangup is not None:
            served = _Undoing(server, self._on_hangup)
        try:
            self._send.send_nowait(served)
        except (trio.BrokenResourceError, trio.ClosedResourceError, trio.WouldBlock):
            raise DaemonDown("connection refused") from None
        return client

    async def accept(self) -> trio.abc.Stream:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise trio.ClosedResourceError from None

    async def aclose(self) -> None:
        # Connections never accepted end at once (their clients see the connection end). No
        # blocking receive: this runs as a crash cancels the node.
        self._send.close()
        while True:
            try:
                stream = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            await trio.aclose_forcefully(stream)
        self._receive.close()
        await trio.lowlevel.checkpoint()


class _Undoing(trio.abc.Stream):
    """The ``undo_on_hangup`` planted bug's server end: when a reply cannot be written (the
    client is gone) it calls ``on_hangup`` (the plant rolls back what the op did)."""

    def __init__(self, inner: trio.abc.Stream, on_hangup: Callable[[], Awaitable[None]]) -> None:
        self._inner, self._on_hangup = inner, on_hangup

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        try:
            await self._inner.send_all(data)
        except trio.BrokenResourceError:
            await self._on_hangup()
            raise

    async def wait_send_all_might_not_block(self) -> None:
        await self._inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self._inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self._inner.aclose()


class Door:
    """One node's control socket across its incarnations: the listener of the current one."""

    def __init__(self) -> None:
        self.listener: MemoryListener | None = None
        self.on_hangup: Callable[[], Awaitable[None]] | None = None  # a planted bug only

    async def listen(self, path: Path) -> MemoryListener:
        """``ControlServer(listen=...)``: a fresh listener for a (re)started control server."""
        del path  # nothing is bound: the world connects through this object
        self.listener = MemoryListener(self.on_hangup)
        return self.listener

    def connect(self, *, slow: bool = False) -> trio.abc.Stream:
        if self.listener is None:
            raise DaemonDown("connection refused")
        return self.listener.connect(slow=slow)


async def request(
    stream: trio.abc.Stream, op: str, params: dict[str, Any], *, slow: bool = False,
    hang_up: int | None = None, on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Send one request and return its reply records (without ``ok``); raise the error a reply
    line carries as a CrosstalkError. With ``hang_up``, close the connection that many scheduler
    steps after sending, read nothing, and raise :class:`HungUp`. ``on_record`` sees each
    record as it comes (a pairing's invite, read out while its op goes on)."""
    line = json.dumps({"v": PROTOCOL_VERSION, "op": op, **params}) + "\n"
    async with stream:
        await stream.send_all(line.encode())
        if hang_up is not None:
            for _ in range(hang_up):
                await trio.lowlevel.checkpoint()
            raise HungUp(op)
        lines = _Lines(stream, slow)
        records: list[dict[str, Any]] = []
        while True:
            reply = await lines.next_reply()
            records.append(reply)
            if on_record is not None:
                on_record(reply)
            if op not in FINAL or FINAL[op] in reply:
                return records


class _Lines:
    def __init__(self, stream: trio.abc.Stream, slow: bool) -> None:
        self._stream, self._slow, self._buffer = stream, slow, b""

    async def next_reply(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            if self._slow:
                await trio.sleep(SLOW_PAUSE)
            chunk = await self._stream.receive_some(SLOW_BYTES if self._slow else None)
            if not chunk:
                raise Ended("the daemon closed the connection before answering")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply: dict[str, Any] = json.loads(line)
        if reply.pop("ok") is False:
            error = reply["error"]
            raise CrosstalkError(str(error["message"]), code=str(error["code"]))
        return reply


async def forget_newest_send(store: Store) -> None:
    """The ``undo_on_hangup`` planted bug: a daemon that rolls back the send it could not answer
    (its newest sent message leaves its outbox, though the relay may already have it)."""
    await store.write(lambda c: c.execute(
        "DELETE FROM sent_messages WHERE rowid = (SELECT max(rowid) FROM sent_messages)"))
