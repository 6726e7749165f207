"""A fault-injecting TCP proxy for resilience tests, in-process or as a subprocess.

Theory of operation. The proxy listens on a loopback port and, for each client it admits, opens
one connection to the target (also loopback). Each connection has two directions: ``up`` (client
to target, towards the relay) and ``down`` (target to client). A direction is a reader task and a
writer task joined by a small bounded channel of chunks, each stamped with the time it was read.

The whole proxy has one current `Mode`: a `Flow` per direction plus whether new connections are
admitted. The mode can be replaced at any moment (`FaultProxy.command`, or a line on the control
socket); every open connection obeys the new mode from its next step on:

- the reader reads unless its direction is frozen (a freeze cancels a read that is waiting for
  bytes, so nothing more is taken from the kernel and the peer's writes back up), and discards
  what it reads while its direction drops;
- the writer forwards a chunk once the current flow lets it: not while frozen, not before
  ``arrived + delay`` under a delay, not faster than the rate under a throttle; a chunk held when
  the mode turns to drop is discarded. One writer per direction, so order is always kept.

Invariants: bytes are forwarded in the order read; a reset closes both sockets of every current
connection with SO_LINGER 0 (an RST, not a FIN); a refused connection is accepted and reset at
once; every channel is bounded, so a held direction pushes back on its sender instead of
buffering without limit. Counters (`ProxyStats`) count bytes when they are handed to the kernel,
so a peer that has received bytes can already see them counted.
"""

from __future__ import annotations

import argparse
import enum
import ipaddress
import json
import math
import os
import signal
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path

import attrs
import trio

CHUNK = 65536
QUEUE = 16  # chunks in flight per direction; small, so a held direction applies back-pressure
THROTTLE_SLICE = 0.05  # a throttled direction writes at most this many seconds' worth at once
CONNECT_TIMEOUT = 5.0  # connecting to a loopback target is refused or done at once
CONTROL_TIMEOUT = 5.0  # a control round trip on a unix socket takes milliseconds
LINE_LIMIT = 4096
ROOT = Path(__file__).resolve().parents[2]


class ProxyCommandError(ValueError):
    """A control command the proxy does not understand; the message says what was wrong."""


class Direction(enum.StrEnum):
    UP = "up"  # client -> target
    DOWN = "down"  # target -> client


class Kind(enum.StrEnum):
    PASS = "pass"
    DELAY = "delay"
    DROP = "drop"
    FREEZE = "freeze"
    THROTTLE = "throttle"


@attrs.frozen
class Flow:
    """What one direction does to its bytes; `value` is seconds (delay) or bytes/s (throttle)."""

    kind: Kind = Kind.PASS
    value: float = 0.0

    def __str__(self) -> str:
        if self.kind in (Kind.DELAY, Kind.THROTTLE):
            return f"{self.kind.value} {self.value:g}"
        return self.kind.value


@attrs.frozen
class Mode:
    """The proxy's whole behaviour: a flow per direction and whether new connections get in."""

    up: Flow = Flow()
    down: Flow = Flow()
    admit: bool = True

    def flow(self, direction: Direction) -> Flow:
        return self.up if direction is Direction.UP else self.down

    def with_flow(self, direction: Direction, flow: Flow) -> Mode:
        if direction is Direction.UP:
            return attrs.evolve(self, up=flow)
        return attrs.evolve(self, down=flow)

    def __str__(self) -> str:
        return f"up={self.up} down={self.down} new={'accept' if self.admit else 'refuse'}"


@attrs.frozen
class Command:
    """A parsed control line: the mode to switch to, and whether to reset current connections."""

    mode: Mode
    reset: bool = False
    target: tuple[str, int] | None = None  # connect new connections here from now on


@attrs.frozen
class ProxyStats:
    """Counters since start, plus the current mode, target and number of open connections."""

    mode: str = ""
    target: str = ""
    open: int = 0
    connections: int = 0  # admitted connections
    refused: int = 0  # connections reset at once because new ones were refused
    resets: int = 0  # connections reset by a `reset` command
    target_failures: int = 0  # admitted connections whose target could not be reached
    up_read: int = 0  # taken from the client's socket (forwarded, dropped or still held)
    down_read: int = 0  # taken from the target's socket
    up_bytes: int = 0  # forwarded client -> target
    down_bytes: int = 0  # forwarded target -> client
    up_dropped: int = 0
    down_dropped: int = 0


def parse_command(mode: Mode, line: str) -> Command:
    """Parse one control line against the current mode.

    Grammar: ``pass [up|down]`` (bare ``pass`` restores everything, admitting again),
    ``delay SECONDS [up|down]``, ``drop [up|down]``, ``freeze [up|down]``,
    ``throttle BYTES_PER_SECOND [up|down]``, ``partition up|down`` (that direction is held, the
    other passes), ``refuse``, ``accept``, ``stats``, ``target IP:PORT`` (new connections go
    there, e.g. to a relay restarted on another port), and ``reset [COMMAND]``, which resets every
    current connection after applying the following command. No direction means both.

    Raises:
        ProxyCommandError: the line is not a command.
    """
    words = line.split()
    if not words:
        raise ProxyCommandError("empty command")
    if words[0] == "reset":
        following = parse_command(mode, " ".join(words[1:])) if words[1:] else Command(mode)
        if following.reset:
            raise ProxyCommandError("reset is followed by at most one mode, not another reset")
        return attrs.evolve(following, reset=True)
    if words[0] == "target":
        if len(words) != 2:
            raise ProxyCommandError("usage: target IP:PORT")
        try:
            return Command(mode, target=loopback_address(words[1]))
        except ValueError as exc:
            raise ProxyCommandError(str(exc)) from None
    return Command(_next_mode(mode, words[0], words[1:]))


def _next_mode(mode: Mode, verb: str, args: list[str]) -> Mode:
    if verb in ("stats", "refuse", "accept"):
        _no_more(verb, args)
        return mode if verb == "stats" else attrs.evolve(mode, admit=verb == "accept")
    if verb == "partition":
        if len(args) != 1 or args[0] not in ("up", "down"):
            raise ProxyCommandError("usage: partition up|down")
        cut = Direction(args[0])
        return mode.with_flow(cut, Flow(Kind.FREEZE)).with_flow(_other(cut), Flow())
    try:
        kind = Kind(verb)
    except ValueError:
        raise ProxyCommandError(f"unknown command {verb!r}") from None
    value = 0.0
    if kind in (Kind.DELAY, Kind.THROTTLE):
        if not args:
            raise ProxyCommandError(f"usage: {verb} NUMBER [up|down]")
        value = _number(args.pop(0), positive=kind is Kind.THROTTLE)
    if not args:
        return Mode() if kind is Kind.PASS else attrs.evolve(mode, up=Flow(kind, value),
                                                             down=Flow(kind, value))
    if args[0] not in ("up", "down"):
        raise ProxyCommandError(f"direction must be up or down, not {args[0]!r}")
    _no_more(verb, args[1:])
    return mode.with_flow(Direction(args[0]), Flow(kind, value))


def _other(direction: Direction) -> Direction:
    return Direction.DOWN if direction is Direction.UP else Direction.UP


def _no_more(verb: str, args: list[str]) -> None:
    if args:
        raise ProxyCommandError(f"unexpected {' '.join(args)!r} after {verb}")


def _number(text: str, *, positive: bool) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ProxyCommandError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ProxyCommandError(f"out of range: {text!r}")
    return value


def loopback_address(text: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (IP literal, ``[::1]`` form for IPv6) and insist it is loopback."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    try:
        ip = ipaddress.ip_address(host)
        number = int(port)
    except ValueError:
        raise ValueError(f"expected IP:PORT, got {text!r}") from None
    if not ip.is_loopback or not 0 <= number <= 65535:
        raise ValueError(f"{text!r} is not a loopback address and port; the proxy is loopback only")
    return host, number


def _abort(stream: trio.SocketStream | None) -> None:
    """Close a socket with SO_LINGER 0 so the peer gets an RST instead of a FIN."""
    if stream is None:
        return
    with suppress(OSError):  # the peer may already have reset it; closing is what matters
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    stream.socket.close()


@attrs.frozen
class _Chunk:
    arrived: float
    data: bytes


class _Link:
    """One proxied connection: its two sockets and the cancel scope that ends it."""

    def __init__(self, client: trio.SocketStream) -> None:
        self.client = client
        self.target: trio.SocketStream | None = None
        self.scope = trio.CancelScope()
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True
        self.scope.cancel()

    def close(self) -> None:
        for stream in (self.client, self.target):
            if self.aborted:
                _abort(stream)
            elif stream is not None:
                stream.socket.close()


class FaultProxy:
    """A loopback TCP proxy whose behaviour can be switched while connections are open.

    Use: ``port = await nursery.start(proxy.run)``, then ``proxy.command("freeze up")``.
    """

    def __init__(self, target: tuple[str, int], *, listen: tuple[str, int] = ("127.0.0.1", 0),
                 mode: Mode = Mode()) -> None:
        for host, port in (target, listen):
            loopback_address(f"[{host}]:{port}")
        self.target = target
        self.listen = listen
        self.port = 0
        self._mode = mode
        self._stats = ProxyStats()
        self._links: set[_Link] = set()
        self._reading: dict[Direction, set[trio.CancelScope]] = {d: set() for d in Direction}
        self._mode_changed = trio.Event()
        self._stats_changed = trio.Event()

    @property
    def mode(self) -> Mode:
        return self._mode

    def command(self, line: str) -> None:
        """Apply one control line (see `parse_command`); raises `ProxyCommandError`."""
        parsed = parse_command(self._mode, line)
        self.set_mode(parsed.mode)
        if parsed.target is not None:
            self.target = parsed.target
        if parsed.reset:
            self.reset()

    def set_mode(self, mode: Mode) -> None:
        """Switch every open connection, and every new one, to `mode` from its next step."""
        self._mode = mode
        for direction in Direction:
            if mode.flow(direction).kind is Kind.FREEZE:
                for scope in self._reading[direction]:
                    scope.cancel()
        self._mode_changed.set()
        self._mode_changed = trio.Event()

    def reset(self) -> None:
        """Close both sockets of every current connection with an RST."""
        for link in list(self._links):
            link.abort()
            self._add("resets")

    def statistics(self) -> ProxyStats:
        return attrs.evolve(self._stats, mode=str(self._mode), open=len(self._links),
                            target=f"{self.target[0]}:{self.target[1]}")

    async def wait_statistics(self, condition: Callable[[ProxyStats], bool]) -> ProxyStats:
        """Wait until the counters satisfy `condition`; bound it with a cancel scope."""
        while True:
            changed = self._stats_changed
            stats = self.statistics()
            if condition(stats):
                return stats
            await changed.wait()

    def reply(self, line: str) -> str:
        """Apply a control line and answer it as one JSON line (without the newline)."""
        try:
            self.command(line)
        except ProxyCommandError as exc:
            return json.dumps({"ok": False, "error": str(exc)})
        return json.dumps({"ok": True, "stats": attrs.asdict(self.statistics())})

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and proxy until cancelled; `nursery.start` returns the listening port."""
        listeners = await trio.open_tcp_listeners(self.listen[1], host=self.listen[0])
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._handle, listeners)
            task_status.started(self.port)

    def _add(self, field: str, amount: int = 1) -> None:
        self._stats = attrs.evolve(self._stats, **{field: getattr(self._stats, field) + amount})
        self._stats_changed.set()
        self._stats_changed = trio.Event()

    async def _handle(self, client: trio.SocketStream) -> None:
        if not self._mode.admit:
            self._add("refused")
            _abort(client)
            return
        link = _Link(client)
        self._links.add(link)
        self._add("connections")
        try:
            with link.scope:
                await self._connect_and_pump(link)
        finally:
            self._links.discard(link)
            link.close()

    async def _connect_and_pump(self, link: _Link) -> None:
        with trio.move_on_after(CONNECT_TIMEOUT), suppress(OSError):
            link.target = await trio.open_tcp_stream(*self.target)
        if link.target is None:
            self._add("target_failures")
            link.aborted = True  # the client sees a reset, as it would from a dead relay
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, link, Direction.UP, link.client, link.target)
            nursery.start_soon(self._pump, link, Direction.DOWN, link.target, link.client)

    async def _pump(self, link: _Link, direction: Direction, src: trio.SocketStream,
                    dst: trio.SocketStream) -> None:
        send, receive = trio.open_memory_channel[_Chunk](QUEUE)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._read, direction, src, send)
                nursery.start_soon(self._write, direction, dst, receive)
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            link.abort()  # one side broke: pass the break on to the other side as an RST

    async def _read(self, direction: Direction, src: trio.SocketStream,
                    out: trio.MemorySendChannel[_Chunk]) -> None:
        async with out:
            while True:
                while self._mode.flow(direction).kind is Kind.FREEZE:
                    await self._mode_changed.wait()
                data: bytes | None = None
                with trio.CancelScope() as scope:  # cancelled by set_mode when a freeze starts
                    self._reading[direction].add(scope)
                    try:
                        data = await src.receive_some(CHUNK)
                    finally:
                        self._reading[direction].discard(scope)
                if data is None:
                    continue
                if not data:
                    await out.send(_Chunk(trio.current_time(), b""))  # end of stream
                    return
                self._add(f"{direction}_read", len(data))
                if self._mode.flow(direction).kind is Kind.DROP:
                    self._add(f"{direction}_dropped", len(data))
                    continue
                await out.send(_Chunk(trio.current_time(), data))

    async def _write(self, direction: Direction, dst: trio.SocketStream,
                     chunks: trio.MemoryReceiveChannel[_Chunk]) -> None:
        ready_at = -math.inf  # throttle: when the next piece may go
        async with chunks:
            async for chunk in chunks:
                data = chunk.data
                if not data:  # end of stream: held like bytes, and passed on even under drop
                    await self._hold(direction, chunk.arrived, ready_at)
                    await dst.send_eof()
                    return
                while data:
                    flow = await self._hold(direction, chunk.arrived, ready_at)
                    if flow.kind is Kind.DROP:
                        self._add(f"{direction}_dropped", len(data))
                        break
                    size = len(data)
                    if flow.kind is Kind.THROTTLE:
                        size = min(size, max(1, int(flow.value * THROTTLE_SLICE)))
                        ready_at = max(ready_at, trio.current_time()) + size / flow.value
                    piece, data = data[:size], data[size:]
                    self._add(f"{direction}_bytes", len(piece))
                    await dst.send_all(piece)

    async def _hold(self, direction: Direction, arrived: float, ready_at: float) -> Flow:
        """Wait until the current flow lets a chunk read at `arrived` go; return that flow."""
        while True:
            changed = self._mode_changed
            flow = self._mode.flow(direction)
            due = -math.inf
            if flow.kind is Kind.FREEZE:
                due = math.inf
            elif flow.kind is Kind.DELAY:
                due = arrived + flow.value
            elif flow.kind is Kind.THROTTLE:
                due = ready_at
            if trio.current_time() >= due:
                return flow
            with trio.move_on_at(due):
                await changed.wait()


async def serve_control(proxy: FaultProxy, path: str, *,
                        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the line-based control channel on a unix socket at `path` until cancelled."""
    sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        await sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen()
        listener = trio.SocketListener(sock)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, partial(_control_session, proxy), [listener])
            task_status.started()
    finally:
        sock.close()
        with suppress(FileNotFoundError):
            os.unlink(path)


async def _control_session(proxy: FaultProxy, stream: trio.SocketStream) -> None:
    buffer = b""
    with suppress(trio.BrokenResourceError):  # a control client that vanishes is no fault of ours
        async with stream:
            while True:
                while b"\n" not in buffer:
                    if len(buffer) > LINE_LIMIT:
                        await stream.send_all(b'{"ok": false, "error": "line too long"}\n')
                        return
                    data = await stream.receive_some(LINE_LIMIT)
                    if not data:
                        return
                    buffer += data
                line, _, buffer = buffer.partition(b"\n")
                reply = proxy.reply(line.decode("utf-8", errors="replace"))
                await stream.send_all(reply.encode() + b"\n")


async def control(path: str, line: str) -> ProxyStats:
    """Send one command to a proxy's control socket; return its counters after the command.

    Raises:
        ProxyCommandError: the proxy rejected the command or closed without replying.
        trio.TooSlowError: no reply within CONTROL_TIMEOUT seconds.
    """
    buffer = b""
    with trio.fail_after(CONTROL_TIMEOUT):
        async with await trio.open_unix_socket(path) as stream:
            await stream.send_all(line.encode() + b"\n")
            while not buffer.endswith(b"\n"):
                data = await stream.receive_some(LINE_LIMIT)
                if not data:
                    raise ProxyCommandError("the proxy closed the control socket without a reply")
                buffer += data
    reply = json.loads(buffer)
    if not reply["ok"]:
        raise ProxyCommandError(reply["error"])
    return ProxyStats(**reply["stats"])


@attrs.frozen
class ProxyProcess:
    """A proxy running as a subprocess: its process, listening port and control socket."""

    process: trio.Process
    port: int
    control_path: str

    async def command(self, line: str) -> ProxyStats:
        return await control(self.control_path, line)


@asynccontextmanager
async def open_proxy_process(target_port: int, control_path: str, *, lifetime: float = 600.0,
                             start_timeout: float = 20.0) -> AsyncIterator[ProxyProcess]:
    """Run ``python -m tests.resilience.proxy`` in front of a loopback port; stop it by pid."""
    args = [sys.executable, "-m", "tests.resilience.proxy", "--listen", "127.0.0.1:0",
            "--target", f"127.0.0.1:{target_port}", "--control", control_path,
            "--lifetime", str(lifetime)]
    process = await trio.lowlevel.open_process(args, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(start_timeout):
            while not line.endswith(b"\n"):
                data = await process.stdout.receive_some(LINE_LIMIT)
                if not data:
                    raise RuntimeError(f"proxy exited before listening: {process.returncode}")
                line += data
        port = int(json.loads(line)["listening"].rsplit(":", 1)[1])
        yield ProxyProcess(process, port, control_path)
    finally:
        await _stop(process)


async def _stop(process: trio.Process) -> None:
    """SIGTERM by pid, wait a bounded time, then SIGKILL; shielded so it runs when cancelled."""
    with trio.CancelScope(shield=True):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if process.returncode is None:
                os.kill(process.pid, sig)
            with trio.move_on_after(10):
                await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def _serve_main(proxy: FaultProxy, control_path: str, lifetime: float) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        with trio.move_on_after(lifetime) as lived:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(proxy.run)
                await nursery.start(serve_control, proxy, control_path)
                ready = {"listening": f"{proxy.listen[0]}:{port}", "control": control_path,
                         "target": f"{proxy.target[0]}:{proxy.target[1]}", "pid": os.getpid()}
                print(json.dumps(ready), flush=True)
                async for signum in signals:
                    print(f"proxy: stopping on signal {signum}", file=sys.stderr)
                    break
                nursery.cancel_scope.cancel()
        if lived.cancelled_caught:
            print(f"proxy: lifetime of {lifetime:g} s is over", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``--listen IP:PORT --target IP:PORT --control PATH [--lifetime S]``."""
    parser = argparse.ArgumentParser(prog="python -m tests.resilience.proxy", description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--target", required=True)
    parser.add_argument("--control", required=True, help="unix socket path for control lines")
    parser.add_argument("--lifetime", type=float, default=600.0, help="seconds before exiting")
    args = parser.parse_args(argv)
    try:
        proxy = FaultProxy(loopback_address(args.target), listen=loopback_address(args.listen))
    except ValueError as exc:
        parser.error(str(exc))
    trio.run(_serve_main, proxy, args.control, args.lifetime)
    return 0


if __name__ == "__main__":
    sys.exit(main())
