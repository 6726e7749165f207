"""The fault-injecting proxy: every mode against a real loopback echo server, switched live.

These tests use real sockets, so they run on the real clock (STYLE 29): times are only ever
checked as lower bounds, and every wait for something that should happen is bounded.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from trio_websocket import ConnectionClosed, WebSocketRequest, open_websocket, serve_websocket

from tests.resilience.proxy import (
    ROOT,
    FaultProxy,
    Mode,
    ProxyCommandError,
    control,
    loopback_address,
    open_proxy_process,
    parse_command,
    serve_control,
)

WAIT = 3.0  # bound on each wait for something that should happen at once
HOLD = 0.3  # how long a test holds a fault to show that nothing gets through
BIG = 32 * 1024 * 1024  # more than loopback socket buffers hold without a reader


class EchoServer:
    """A real TCP server on 127.0.0.1 that records what it receives and echoes it back."""

    def __init__(self) -> None:
        self.port = 0
        self.received = bytearray()
        self.streams: list[trio.SocketStream] = []
        self.resets = 0
        self._changed = trio.Event()

    def _note(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def handle(self, stream: trio.SocketStream) -> None:
        self.streams.append(stream)
        self._note()
        try:
            while data := await stream.receive_some(65536):
                self.received += data
                self._note()
                await stream.send_all(data)
        except trio.BrokenResourceError:
            self.resets += 1
            self._note()

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        with trio.fail_after(WAIT):
            while not condition():
                await self._changed.wait()


@pytest.fixture
async def server(nursery: trio.Nursery) -> EchoServer:
    echo = EchoServer()
    listeners = await nursery.start(partial(trio.serve_tcp, echo.handle, 0, host="127.0.0.1"))
    echo.port = listeners[0].socket.getsockname()[1]
    return echo


@pytest.fixture
async def proxy(nursery: trio.Nursery, server: EchoServer) -> FaultProxy:
    fault_proxy = FaultProxy(("127.0.0.1", server.port))
    await nursery.start(fault_proxy.run)
    return fault_proxy


async def connect(port: int) -> trio.SocketStream:
    with trio.fail_after(WAIT):
        return await trio.open_tcp_stream("127.0.0.1", port)


async def receive_exactly(stream: trio.SocketStream, size: int) -> bytes:
    data = b""
    with trio.fail_after(WAIT):
        while len(data) < size:
            chunk = await stream.receive_some(size - len(data))
            assert chunk, f"end of stream after {data!r}"
            data += chunk
    return data


async def round_trip(stream: trio.SocketStream, data: bytes) -> None:
    await stream.send_all(data)
    assert await receive_exactly(stream, len(data)) == data


async def test_pass_forwards_bytes_both_ways_and_counts_them(
        proxy: FaultProxy, server: EchoServer) -> None:
    """In pass mode bytes cross unchanged and the counters see one connection and both ways."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"hello")
    assert server.received == b"hello"
    stats = proxy.statistics()
    assert (stats.connections, stats.up_bytes, stats.down_bytes) == (1, 5, 5)
    assert stats.mode == "up=pass down=pass new=accept"


async def test_delay_holds_each_direction_at_least_the_delay(proxy: FaultProxy) -> None:
    """With `delay 0.2` a round trip takes at least 0.4 s: each way is held 0.2 s."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("delay 0.2")
        start = trio.current_time()
        await round_trip(client, b"late")
        assert trio.current_time() - start >= 0.4


async def test_delay_up_holds_only_the_upward_direction(
        proxy: FaultProxy, server: EchoServer) -> None:
    """`delay 0.3 up` holds bytes towards the target and leaves the other way passing."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("delay 0.3 up")
        assert proxy.mode.down == Mode().down
        start = trio.current_time()
        await client.send_all(b"x")
        await server.wait_for(lambda: server.received == b"warmx")
        assert trio.current_time() - start >= 0.3


async def test_delay_keeps_order_of_many_chunks(proxy: FaultProxy) -> None:
    """Chunks sent in quick succession under a delay come out whole and in order."""
    payload = b"".join(b"%05d" % n for n in range(400))
    async with await connect(proxy.port) as client:
        proxy.command("delay 0.05")
        for n in range(0, len(payload), 100):
            await client.send_all(payload[n:n + 100])
            await trio.sleep(0.005)  # the scenario: separate chunks, several in flight at once
        assert await receive_exactly(client, len(payload)) == payload


async def test_switching_delay_to_pass_releases_held_chunks(proxy: FaultProxy) -> None:
    """Chunks held by a long delay go at once when the mode turns to `pass`."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("delay 60")
        await client.send_all(b"held")
        with trio.fail_after(WAIT):
            await proxy.wait_statistics(lambda s: s.up_read == 8)
        assert proxy.statistics().up_bytes == 4
        proxy.command("pass")
        assert await receive_exactly(client, 4) == b"held"


async def test_drop_discards_bytes_and_keeps_the_connection_open(
        proxy: FaultProxy, server: EchoServer) -> None:
    """Bytes sent under `drop` vanish; after `pass` the same connection carries new bytes."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("drop")
        await client.send_all(b"lost")
        with trio.fail_after(WAIT):
            await proxy.wait_statistics(lambda s: s.up_dropped == 4)
        proxy.command("pass")
        await round_trip(client, b"kept")
    assert server.received == b"warmkept"


async def test_drop_down_loses_replies_but_not_requests(
        proxy: FaultProxy, server: EchoServer) -> None:
    """Under `drop down` the target gets the bytes, and its reply vanishes on the way back."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("drop down")
        await client.send_all(b"ping")
        with trio.fail_after(WAIT):
            await proxy.wait_statistics(lambda s: s.down_dropped == 4)
        assert server.received == b"warmping"
        proxy.command("pass")
        await round_trip(client, b"pong")


async def test_drop_keeps_reading_so_a_big_send_completes(proxy: FaultProxy) -> None:
    """`drop` reads everything it is sent, so a sender never backs up."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("drop")
        with trio.fail_after(WAIT):
            await client.send_all(bytes(BIG))
            await proxy.wait_statistics(lambda s: s.up_dropped == BIG)


async def test_freeze_forwards_nothing_then_resumes_after_pass(
        proxy: FaultProxy, server: EchoServer) -> None:
    """While frozen no byte moves either way; `pass` releases what was held, in order."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("freeze")
        await client.send_all(b"held")
        with trio.move_on_after(HOLD) as holding:
            await client.receive_some(10)
        assert holding.cancelled_caught
        assert server.received == b"warm"
        stats = proxy.statistics()
        assert (stats.up_read, stats.up_bytes, stats.down_bytes) == (4, 4, 4)
        proxy.command("pass")
        assert await receive_exactly(client, 4) == b"held"


async def test_freeze_stops_reading_so_the_sender_backs_up(proxy: FaultProxy) -> None:
    """A frozen socket takes nothing more from the kernel: a big send cannot finish."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("freeze")
        with trio.move_on_after(HOLD) as sending:
            await client.send_all(bytes(BIG))
        assert sending.cancelled_caught
        stats = proxy.statistics()
        assert (stats.up_read, stats.up_bytes, stats.up_dropped) == (4, 4, 0)


async def test_freeze_leaves_a_websocket_ping_unanswered_until_pass(nursery: trio.Nursery) -> None:
    """Through a frozen proxy a WebSocket ping gets no pong, as a heartbeat sees it; pass heals."""

    async def echo(request: WebSocketRequest) -> None:
        ws = await request.accept()
        with suppress(ConnectionClosed):
            while True:
                await ws.send_message(await ws.get_message())

    server = await nursery.start(partial(serve_websocket, echo, "127.0.0.1", 0, None,
                                         connect_timeout=WAIT, disconnect_timeout=WAIT))
    fault_proxy = FaultProxy(("127.0.0.1", server.port))
    await nursery.start(fault_proxy.run)
    async with open_websocket("127.0.0.1", fault_proxy.port, "/", use_ssl=False,
                              connect_timeout=WAIT, disconnect_timeout=WAIT) as ws:
        with trio.fail_after(WAIT):
            await ws.ping()
        fault_proxy.command("freeze")
        with trio.move_on_after(HOLD) as waiting:
            await ws.ping()
        assert waiting.cancelled_caught
        fault_proxy.command("pass")
        with trio.fail_after(WAIT):
            await ws.send_message("after")
            assert await ws.get_message() == "after"


async def test_reset_sends_rst_to_both_sides_and_new_connections_pass(
        proxy: FaultProxy, server: EchoServer) -> None:
    """`reset` aborts every current connection (the client sees a reset, not an EOF)."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("reset")
        with trio.fail_after(WAIT), pytest.raises(trio.BrokenResourceError):
            await client.receive_some(10)
    await server.wait_for(lambda: server.resets == 1)
    assert proxy.statistics().resets == 1
    async with await connect(proxy.port) as again:
        await round_trip(again, b"back")
    assert proxy.statistics().connections == 2


async def test_reset_refuse_resets_current_and_refuses_new_until_accept(
        proxy: FaultProxy, server: EchoServer) -> None:
    """`reset refuse` aborts current connections and resets new ones at once; `accept` ends it."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("reset refuse")
        with trio.fail_after(WAIT), pytest.raises(trio.BrokenResourceError):
            await client.receive_some(10)
    async with await connect(proxy.port) as refused:
        with trio.fail_after(WAIT), pytest.raises(trio.BrokenResourceError):
            await refused.receive_some(10)
    assert proxy.statistics().refused == 1
    assert len(server.streams) == 1
    proxy.command("accept")
    async with await connect(proxy.port) as admitted:
        await round_trip(admitted, b"back")


async def test_refuse_leaves_open_connections_flowing(proxy: FaultProxy) -> None:
    """`refuse` only affects new connections; an open one keeps carrying bytes."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("refuse")
        async with await connect(proxy.port) as refused:
            with trio.fail_after(WAIT), pytest.raises(trio.BrokenResourceError):
                await refused.receive_some(10)
        await round_trip(client, b"still")


async def test_throttle_caps_throughput(proxy: FaultProxy, server: EchoServer) -> None:
    """At `throttle 20000 up`, 10000 bytes take at least (10000 - one slice) / 20000 s."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("throttle 20000 up")
        start = trio.current_time()
        await client.send_all(bytes(10000))
        await server.wait_for(lambda: len(server.received) == 4 + 10000)
        assert trio.current_time() - start >= (10000 - 1000) / 20000


async def test_partition_up_forwards_only_downward(
        proxy: FaultProxy, server: EchoServer) -> None:
    """`partition up` holds client-to-target bytes while target-to-client bytes still pass."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("partition up")
        await server.streams[0].send_all(b"news")
        assert await receive_exactly(client, 4) == b"news"
        await client.send_all(b"up")
        with trio.move_on_after(HOLD):
            await server.wait_for(lambda: server.received != b"warm")
        assert server.received == b"warm"
        proxy.command("pass")
        await server.wait_for(lambda: server.received == b"warmup")


async def test_partition_down_forwards_only_upward(
        proxy: FaultProxy, server: EchoServer) -> None:
    """`partition down` lets requests reach the target and holds its replies until healed."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("partition down")
        await client.send_all(b"up")
        await server.wait_for(lambda: server.received == b"warmup")
        with trio.move_on_after(HOLD) as holding:
            await client.receive_some(10)
        assert holding.cancelled_caught
        proxy.command("pass")
        assert await receive_exactly(client, 2) == b"up"


async def test_switching_modes_mid_stream_loses_and_reorders_nothing(proxy: FaultProxy) -> None:
    """Cycling through every lossless mode while bytes flow delivers them all, in order."""
    payload = b"".join(b"%07d" % n for n in range(30000))
    modes = ["delay 0.05", "freeze", "throttle 500000", "partition up", "partition down",
             "delay 0.02 down", "freeze up", "pass"]
    async with await connect(proxy.port) as client:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client.send_all, payload)
            for line in modes:
                proxy.command(line)
                await trio.sleep(0.05)  # the fault itself: hold each mode a moment
            assert await receive_exactly(client, len(payload)) == payload


async def test_target_command_sends_new_connections_to_another_port(
        nursery: trio.Nursery, proxy: FaultProxy, server: EchoServer) -> None:
    """After `target IP:PORT`, open connections stay put and new ones reach the new target."""
    second = EchoServer()
    listeners = await nursery.start(partial(trio.serve_tcp, second.handle, 0, host="127.0.0.1"))
    second.port = listeners[0].socket.getsockname()[1]
    async with await connect(proxy.port) as old:
        await round_trip(old, b"one")
        proxy.command(f"target 127.0.0.1:{second.port}")
        assert proxy.statistics().target == f"127.0.0.1:{second.port}"
        async with await connect(proxy.port) as new:
            await round_trip(new, b"two")
        await round_trip(old, b"three")
    assert (bytes(server.received), bytes(second.received)) == (b"onethree", b"two")


async def test_eof_passes_through_to_the_target_and_back(proxy: FaultProxy) -> None:
    """A client's half-close reaches the target, whose close comes back as end of stream."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        await client.send_eof()
        with trio.fail_after(WAIT):
            assert await client.receive_some(10) == b""


async def test_eof_is_delayed_like_bytes(proxy: FaultProxy) -> None:
    """Under `delay 0.3 up` a half-close reaches the target no sooner than 0.3 s later."""
    async with await connect(proxy.port) as client:
        await round_trip(client, b"warm")
        proxy.command("delay 0.3 up")
        start = trio.current_time()
        await client.send_eof()
        with trio.fail_after(WAIT):
            assert await client.receive_some(10) == b""
        assert trio.current_time() - start >= 0.3


async def test_unreachable_target_resets_the_client(nursery: trio.Nursery) -> None:
    """When the target refuses, the client sees a reset and the proxy counts the failure."""
    sock = trio.socket.socket()
    await sock.bind(("127.0.0.1", 0))
    dead_port = sock.getsockname()[1]
    sock.close()
    fault_proxy = FaultProxy(("127.0.0.1", dead_port))
    await nursery.start(fault_proxy.run)
    async with await connect(fault_proxy.port) as client:
        with trio.fail_after(WAIT), pytest.raises(trio.BrokenResourceError):
            await client.receive_some(10)
    assert fault_proxy.statistics().target_failures == 1


async def test_control_socket_switches_modes_and_reports_errors(
        nursery: trio.Nursery, proxy: FaultProxy, tmp_path: Path) -> None:
    """A control line switches the mode and answers the counters; a bad line gets an error."""
    path = str(tmp_path / "ctl")
    await nursery.start(serve_control, proxy, path)
    stats = await control(path, "freeze up")
    assert stats.mode == "up=freeze down=pass new=accept"
    assert proxy.mode.up.kind.value == "freeze"
    with pytest.raises(ProxyCommandError, match="unknown command 'sleep'"):
        await control(path, "sleep 3")
    assert (await control(path, "stats")).mode == stats.mode


async def test_subprocess_proxy_switches_modes_and_stops_on_sigterm(
        server: EchoServer, tmp_path: Path) -> None:
    """The `python -m` form reports its port, obeys its control socket and exits 0 on SIGTERM."""
    path = str(tmp_path / "ctl")
    async with open_proxy_process(server.port, path) as running:
        async with await connect(running.port) as client:
            await round_trip(client, b"warm")
            frozen = await running.command("freeze")
            await client.send_all(b"held")
            with trio.move_on_after(HOLD) as holding:
                await client.receive_some(10)
            assert holding.cancelled_caught
            assert server.received == b"warm"
            await running.command("pass")
            assert await receive_exactly(client, 4) == b"held"
        assert (frozen.connections, frozen.up_bytes, frozen.down_bytes) == (1, 4, 4)
        os.kill(running.process.pid, signal.SIGTERM)
        with trio.fail_after(WAIT):
            assert await running.process.wait() == 0
        assert not await trio.Path(path).exists()


async def test_subprocess_proxy_exits_when_its_lifetime_is_over(
        server: EchoServer, tmp_path: Path) -> None:
    """`--lifetime` bounds the subprocess: it exits 0 on its own when the time is up."""
    async with open_proxy_process(server.port, str(tmp_path / "ctl"), lifetime=0.5) as running:
        with trio.fail_after(WAIT):
            assert await running.process.wait() == 0


async def test_subprocess_proxy_refuses_a_non_loopback_target(tmp_path: Path) -> None:
    """The command line rejects a non-loopback target with a usage error (exit 2)."""
    args = [sys.executable, "-m", "tests.resilience.proxy", "--target", "10.1.2.3:80",
            "--control", str(tmp_path / "ctl")]
    with trio.fail_after(20):
        done = await trio.run_process(args, cwd=ROOT, check=False, capture_stderr=True)
    assert done.returncode == 2
    assert b"loopback only" in done.stderr


@pytest.mark.parametrize(("line", "expected"), [
    ("pass", "up=pass down=pass new=accept"),
    ("delay 0.25", "up=delay 0.25 down=delay 0.25 new=accept"),
    ("delay 1 down", "up=pass down=delay 1 new=accept"),
    ("drop up", "up=drop down=pass new=accept"),
    ("freeze", "up=freeze down=freeze new=accept"),
    ("throttle 1000 up", "up=throttle 1000 down=pass new=accept"),
    ("partition up", "up=freeze down=pass new=accept"),
    ("partition down", "up=pass down=freeze new=accept"),
    ("refuse", "up=pass down=pass new=refuse"),
    ("reset refuse", "up=pass down=pass new=refuse"),
    ("reset", "up=pass down=pass new=accept"),
    ("stats", "up=pass down=pass new=accept"),
])
def test_parse_command_table(line: str, expected: str) -> None:
    """Each command line yields the mode it names, starting from the default mode."""
    parsed = parse_command(Mode(), line)
    assert str(parsed.mode) == expected
    assert parsed.reset == line.startswith("reset")


def test_bare_pass_restores_everything_including_admission() -> None:
    """`pass` undoes every fault at once, including `refuse`; `pass up` touches only up."""
    faulty = parse_command(parse_command(Mode(), "freeze").mode, "refuse").mode
    assert str(parse_command(faulty, "pass up").mode) == "up=pass down=freeze new=refuse"
    assert parse_command(faulty, "pass").mode == Mode()


def test_target_and_reset_target_parse_to_a_loopback_address() -> None:
    """`target` names where new connections go; `reset target` also resets the current ones."""
    assert parse_command(Mode(), "target 127.0.0.1:9").target == ("127.0.0.1", 9)
    parsed = parse_command(Mode(), "reset target [::1]:7")
    assert (parsed.reset, parsed.target, parsed.mode) == (True, ("::1", 7), Mode())


@pytest.mark.parametrize("line", [
    "", "sleep", "delay", "delay -1", "delay nan", "throttle 0", "throttle x",
    "drop sideways", "freeze up down", "partition", "partition both", "refuse now",
    "reset reset", "stats please", "target", "target 10.0.0.1:80", "target 127.0.0.1:1 x",
])
def test_parse_command_rejects_bad_lines(line: str) -> None:
    """Malformed lines raise ProxyCommandError instead of changing the mode."""
    with pytest.raises(ProxyCommandError):
        parse_command(Mode(), line)


@given(st.text(max_size=40))
def test_parse_command_never_fails_otherwise(line: str) -> None:
    """Any text either parses or raises ProxyCommandError; nothing else escapes."""
    try:
        parsed = parse_command(Mode(), line)
    except ProxyCommandError:
        return
    assert isinstance(parsed.mode, Mode)


@pytest.mark.parametrize("text", [
    "10.0.0.1:80", "0.0.0.0:0", "localhost:80", "127.0.0.1:70000", "127.0.0.1", "[::]:1",
])
def test_only_loopback_addresses_are_accepted(text: str) -> None:
    """The proxy refuses to listen on or forward to anything but loopback."""
    with pytest.raises(ValueError):
        loopback_address(text)


def test_loopback_addresses_parse() -> None:
    """IPv4 and bracketed IPv6 loopback addresses parse to host and port."""
    assert loopback_address("127.0.0.1:0") == ("127.0.0.1", 0)
    assert loopback_address("[::1]:8080") == ("::1", 8080)
    with pytest.raises(ValueError):
        FaultProxy(("192.168.1.1", 80))
