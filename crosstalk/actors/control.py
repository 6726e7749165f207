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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

import attrs
import trio

from crosstalk.actors.supervisor import ActorContext
from crosstalk.errors import CrosstalkError, UnknownOp
from crosstalk.wire.control import (
    MAX_REQUEST_BYTES,
    ControlRequest,
    render_error,
    render_ok,
)
from crosstalk.wire.converter import structure_remote, unstructure

log = logging.getLogger(__name__)

P = TypeVar("P")
Handler = Callable[[P], Awaitable[Any]]


@attrs.frozen
class _Op(Generic[P]):
    params: type[P]
    handler: Handler[P]


class OpTable:
    """The ops the control socket serves: name → (params model, async handler).

    A handler receives its params already structured into its attrs model and returns an attrs
    instance (or a mapping) that becomes the reply's fields.
    """

    def __init__(self) -> None:
        self._ops: dict[str, _Op[Any]] = {}

    def add(self, name: str, params: type[P], handler: Handler[P]) -> None:
        """Register one op. Names are unique."""
        if name in self._ops:
            raise ValueError(f"op {name!r} registered twice")
        self._ops[name] = _Op(params, handler)

    def names(self) -> list[str]:
        return sorted(self._ops)

    async def dispatch(self, request: ControlRequest) -> dict[str, Any]:
        """Run one request and return the reply fields; raise CrosstalkError on failure."""
        op = self._ops.get(request.op)
        if op is None:
            raise UnknownOp(f"The daemon has no operation called {request.op!r}.")
        params = structure_remote(dict(request.params), op.params)
        result = await op.handler(params)
        data = unstructure(result)
        if not isinstance(data, dict):
            raise TypeError(f"op {request.op!r} returned {type(result).__name__}, not a record")
        return data


async def _answer(ops: OpTable, line: bytes) -> bytes:
    try:
        request = ControlRequest.from_line(line)
    except CrosstalkError as exc:
        return render_error(exc)
    try:
        return render_ok(await ops.dispatch(request))
    except CrosstalkError as exc:
        return render_error(exc)
    except Exception as exc:
        # A bug in one op must not drop every other client's connection: log it loudly and
        # answer this client, instead of letting it restart the whole control server.
        log.error("op %r failed", request.op, exc_info=exc)
        return render_error(CrosstalkError(f"The daemon hit a bug running {request.op!r}."))


class ControlServer:
    """Actor serving ``ops`` on the unix socket at ``path`` (mode 0600)."""

    def __init__(self, path: Path, ops: OpTable) -> None:
        self._path = path
        self._ops = ops

    async def run(
        self,
        ctx: ActorContext[None],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        listener = await _open_listener(self._path)
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

    async def _serve(self, stream: trio.SocketStream) -> None:
        buffer = b""
        async with stream:
            try:
                while True:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    buffer += chunk
                    while b"\n" in buffer:
                        line, _, buffer = buffer.partition(b"\n")
                        if line.strip():
                            await stream.send_all(await _answer(self._ops, line))
                    if len(buffer) > MAX_REQUEST_BYTES:
                        await stream.send_all(await _answer(self._ops, buffer))
                        return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return


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
