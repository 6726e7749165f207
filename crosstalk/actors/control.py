"""The control server: the daemon's unix socket (DESIGN §9).

Every CLI command, hook and MCP tool reaches the daemon through here. Each connection is read
line by line; each line is one request, answered in order. A bad line gets an error reply and
the connection carries on (an oversized one closes that connection, since the stream cannot be
resynchronised); nothing a client sends can take the server, or anyone else's connection, down.
Ops are added by registering them in an :class:`OpTable` before the server starts.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator, Mapping
from contextlib import aclosing, contextmanager
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import attrs
import trio

from crosstalk import sim_hooks
from crosstalk.actors.supervisor import ActorContext
from crosstalk.errors import CrosstalkError, UnknownOp
from crosstalk.wire.control import (
    MAX_REQUEST_BYTES,
    ControlRequest,
    render_error,
    render_ok,
)
from crosstalk.wire.control.spec import OpSpec
from crosstalk.wire.converter import structure_remote, unstructure

log = logging.getLogger(__name__)


class ServedOps(Protocol):
    """What the control server asks for each request: the op table that serves it."""

    async def table_for(self, op: str) -> OpTable: ...


P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[[P], Awaitable[Any]]
StreamHandler = Callable[[P], AsyncGenerator[Any, None]]


@attrs.frozen
class _Op(Generic[P]):
    spec: OpSpec[P]
    handler: Handler[P] | None = None
    stream: StreamHandler[P] | None = None


class OpTable:
    """The ops the control socket serves, each by its spec in the one table
    (:mod:`crosstalk.wire.control.table`) with its handler.

    A handler receives its params already structured into the spec's model and returns an
    instance of the spec's reply model, which becomes the reply's fields. A *stream* handler is
    an async generator: each record it yields is one reply line, and the connection is its own
    until it ends (``room new`` prints the invite at once and the result minutes later;
    ``watch`` never ends). A client that hangs up cancels its stream. A reply of another model,
    or an error the spec does not declare, is a bug in the op: the first is answered as one, the
    second is logged as one (its code still reaches the client unchanged).
    """

    def __init__(self) -> None:
        self._ops: dict[str, _Op[Any]] = {}
        self._timed: dict[str, Callable[[float, float], None]] = {}

    def add(self, spec: OpSpec[P], handler: Handler[P]) -> None:
        """Register one request/reply op. Names are unique."""
        self._register(_Op(spec, handler=handler))

    def add_stream(self, spec: OpSpec[P], handler: StreamHandler[P]) -> None:
        """Register one streaming op (an async generator of reply records)."""
        self._register(_Op(spec, stream=handler))

    def _register(self, op: _Op[Any]) -> None:
        name = op.spec.name
        if name in self._ops:
            raise ValueError(f"op {name!r} registered twice")
        if op.spec.stream != (op.stream is not None):
            raise ValueError(f"op {name!r}: its spec and its handler disagree on streaming")
        self._ops[name] = op

    def time(self, name: str, observe: Callable[[float, float], None]) -> None:
        """Time each request for the request/reply op ``name`` from its params to its reply,
        failures included: ``observe(seconds, now)`` (``now`` is trio's clock). Calls from
        inside the daemon (:meth:`call`) are not timed: they are part of another op."""
        self._timed[name] = observe

    def names(self) -> list[str]:
        return sorted(self._ops)

    def is_stream(self, name: str) -> bool:
        op = self._ops.get(name)
        return op is not None and op.stream is not None

    def has(self, name: str) -> bool:
        return name in self._ops

    async def table_for(self, op: str) -> OpTable:
        """The table that serves ``op``: this one (a daemon's gate may answer otherwise while it
        starts: :mod:`crosstalk.actors.control_gate`)."""
        return self

    async def call(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Run the request/reply op ``name`` from inside the daemon, as a request would (an op
        that does several ops' work in one round trip calls them through here)."""
        op = self._ops.get(name)
        if op is None or op.handler is None:
            raise UnknownOp(f"The daemon has no request/reply operation called {name!r}.")
        with _declared(op.spec):
            result = await op.handler(structure_remote(dict(params), op.spec.params))
        return _record(op.spec, result)

    async def run(self, spec: OpSpec[P], params: P, reply: type[R]) -> R:
        """Run the request/reply op of ``spec`` from inside the daemon with its params model,
        and return its reply model (``reply``, which the spec names): one feature's op using
        another's, typed end to end."""
        op = self._ops.get(spec.name)
        if op is None or op.handler is None:
            raise UnknownOp(f"The daemon has no request/reply operation called {spec.name!r}.")
        with _declared(op.spec):
            result = await op.handler(params)
        if not isinstance(result, reply):
            raise TypeError(f"op {spec.name!r} returned {type(result).__name__}, not "
                            f"{reply.__name__}")
        return result

    async def replies(self, request: ControlRequest) -> AsyncGenerator[dict[str, Any], None]:
        """Run one request and yield its reply records; raise CrosstalkError on failure."""
        op = self._ops.get(request.op)
        if op is None:
            raise UnknownOp(f"The daemon has no operation called {request.op!r}.")
        with _declared(op.spec):
            params = structure_remote(dict(request.params), op.spec.params)
            if op.handler is not None:
                yield _record(op.spec, await self._timed_call(op, params))
                return
            assert op.stream is not None
            async with aclosing(op.stream(params)) as results:
                async for result in results:
                    yield _record(op.spec, result)

    async def _timed_call(self, op: _Op[P], params: P) -> object:
        assert op.handler is not None
        observe = self._timed.get(op.spec.name)
        if observe is None:
            return await op.handler(params)
        began = trio.current_time()
        try:
            return await op.handler(params)
        finally:
            now = trio.current_time()
            observe(now - began, now)


@contextmanager
def _declared(spec: OpSpec[Any]) -> Iterator[None]:
    """Let the op's errors through; log one its spec does not declare as the bug it is (the
    table, the docs and the tools would not tell a client it can happen)."""
    try:
        yield
    except CrosstalkError as exc:
        if not spec.declares(exc):
            log.error("op %r raised %r (%s), which its spec does not declare",
                      spec.name, exc.code, type(exc).__name__)
        raise


def _record(spec: OpSpec[Any], result: object) -> dict[str, Any]:
    models = spec.replies()
    if not isinstance(result, models):
        wanted = " or ".join(model.__name__ for model in models)
        raise TypeError(f"op {spec.name!r} returned {type(result).__name__}, not {wanted}")
    data = unstructure(result)
    if not isinstance(data, dict):
        raise TypeError(f"op {spec.name!r} returned {type(result).__name__}, not a record")
    return data


Listen = Callable[[Path], Awaitable[trio.abc.Listener[trio.abc.Stream]]]
"""Opens the listener a control server accepts its connections from."""


class ControlServer:
    """Actor serving ``ops`` on the unix socket at ``path`` (mode 0600).

    ``ops`` is an :class:`OpTable`, or anything that picks one per op (the daemon's
    :class:`~crosstalk.actors.control_gate.OpGate`, which serves while it starts). ``listen``
    opens the listener: the unix socket, or (the simulation, tests/sim/door.py) in-memory byte
    streams served by this same framing and dispatch."""

    def __init__(self, path: Path, ops: ServedOps, *, listen: Listen | None = None) -> None:
        self._path = path
        self._ops = ops
        self._listen = listen or _open_listener

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listener = await self._listen(self._path)
        async with listener, trio.open_nursery() as nursery:
            nursery.start_soon(self._beat, ctx)
            log.info("control socket listening at %s", self._path)
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(self._serve, stream)

    async def _beat(self, ctx: ActorContext[None]) -> None:
        # The accept loop proves nothing while idle; the beat shows this actor's loop is live.
        while True:
            ctx.beat()
            await trio.sleep(ctx.heartbeat / 3)

    async def _serve(self, stream: trio.abc.Stream) -> None:
        conn = _Connection(stream)
        async with stream:
            try:
                while (line := await conn.next_line()) is not None:
                    if line.strip():
                        await conn.answer(self._ops, line)
            except _HungUp as gone:
                # Not a bug and not a degradation: the client chose to stop listening (a CLI
                # killed by Ctrl-C, a hook past its deadline). Its reply is undeliverable.
                sim_hooks.probe("control.reply_undeliverable")
                log.debug("control: client hung up before the reply to %r", gone.op)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


class _HungUp(Exception):
    """The client closed its end before a reply could be written to it."""

    def __init__(self, op: str) -> None:
        super().__init__(op)
        self.op = op


class _Connection:
    """One client connection: splits lines, answers them in order, notices a hang-up."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self._stream = stream
        self._buffer = b""
        self._eof = False
        self._peer_cwd = peer_cwd(stream)

    async def _fill(self) -> None:
        chunk = await self._stream.receive_some(65536)
        if chunk:
            self._buffer += chunk
        else:
            self._eof = True

    async def next_line(self) -> bytes | None:
        """The next line; an oversized one is returned whole (and refused); None at EOF."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_REQUEST_BYTES or self._eof:
                # An oversized line cannot be resynchronised: answer it, then end the connection.
                line, self._buffer, self._eof = self._buffer, b"", True
                return line or None
            await self._fill()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    async def answer(self, served: ServedOps, line: bytes) -> None:
        """Send every reply line for one request, or one error line."""
        try:
            request = ControlRequest.from_line(line)
            # Where the caller really runs, from the kernel, never from what it wrote.
            params = {k: v for k, v in request.params.items() if k != PEER_CWD}
            if self._peer_cwd is not None:
                params[PEER_CWD] = self._peer_cwd
            request = attrs.evolve(request, params=params)
            ops = await served.table_for(request.op)
        except CrosstalkError as exc:
            await self._write(render_error(exc), "?")
            return
        if not ops.is_stream(request.op):
            await self._send_replies(ops, request)
            return
        async with trio.open_nursery() as nursery:
            # While a (possibly endless) stream runs, keep reading so a hang-up cancels it.
            nursery.start_soon(self._watch_hangup, nursery.cancel_scope)
            await self._send_replies(ops, request)
            nursery.cancel_scope.cancel()

    async def _watch_hangup(self, scope: trio.CancelScope) -> None:
        while not self._eof:
            await self._fill()
        if b"\n" not in self._buffer:
            sim_hooks.probe("control.stream_hung_up")
            scope.cancel()

    async def _write(self, data: bytes, op: str) -> None:
        """Send one reply line; a client that has gone is :class:`_HungUp`, not an op's bug."""
        try:
            await self._stream.send_all(data)
        except trio.BrokenResourceError:
            raise _HungUp(op) from None

    async def _send_replies(self, ops: OpTable, request: ControlRequest) -> None:
        try:
            async with aclosing(ops.replies(request)) as replies:
                async for reply in replies:
                    await self._write(render_ok(reply), request.op)
        except _HungUp:
            raise  # before the bug handler below: a hang-up is the client's choice
        except CrosstalkError as exc:
            await self._write(render_error(exc), request.op)
        except Exception as exc:
            # A bug in one op must not drop every other client's connection: log it loudly
            # and answer this client, instead of letting it restart the whole control server.
            log.error("op %r failed", request.op, exc_info=exc)
            error = CrosstalkError(f"The daemon hit a bug running {request.op!r}.")
            await self._write(render_error(error), request.op)


PEER_CWD = "peer_cwd"
"""The parameter the control server sets to the calling process's working directory."""


def peer_cwd(stream: trio.abc.Stream) -> str | None:
    """The working directory of the process at the other end of a unix socket (Linux: its pid
    from ``SO_PEERCRED``, then ``/proc/PID/cwd``); None where that cannot be known (no socket
    under the stream: the simulation's in-memory connections)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or not isinstance(stream, trio.SocketStream):
        return None
    try:
        creds = stream.socket.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
        pid = struct.unpack("3i", creds)[0]
        return os.readlink(f"/proc/{pid}/cwd") if pid > 0 else None
    except OSError:
        return None


async def _open_listener(path: Path) -> trio.SocketListener:
    # Only one daemon holds the home's lock, so a socket file left here is stale.
    path.unlink(missing_ok=True)  # noqa: ASYNC240 - one local unlink at start-up
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # the socket is created 0600: only this user may talk to it
    try:
        await sock.bind(str(path))
    finally:
        os.umask(old_umask)
    sock.listen(64)
    return trio.SocketListener(sock)
