"""The load generator's WebSocket client speaks to a real trio-websocket server: frames of every
length form both ways, several frames from one read, a ping answered, a close ending it."""

from __future__ import annotations

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, serve_websocket

from bench._wsload import LoadSocket, open_load_socket


async def _serve(handler: object, nursery: trio.Nursery) -> int:
    server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
    port: int = server.port
    return port


async def _echo(request: WebSocketRequest) -> None:
    ws = await request.accept()
    try:
        while True:
            await ws.send_message(await ws.get_message())
    except ConnectionClosed:
        pass


async def _payloads(ws: LoadSocket, count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        got += await ws.receive_payloads()
    return got


@pytest.mark.parametrize("size", [0, 1, 125, 126, 300, 65535, 65536, 70_000])
async def test_a_message_of_every_length_form_comes_back_whole(size: int) -> None:
    """A masked frame of each header form reaches the server intact, and its echo parses."""
    text = "".join(chr(48 + i % 40) for i in range(size))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ws = await open_load_socket(await _serve(_echo, nursery))
            await ws.send_message(text)
            assert await ws.get_message() == text
            await ws.aclose()
            nursery.cancel_scope.cancel()


async def test_frames_joined_in_one_write_come_back_as_separate_payloads_in_order() -> None:
    """Several frames written at once are echoed and handed out one payload each, in order."""
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ws = await open_load_socket(await _serve(_echo, nursery))
            await ws.send_raw(b"".join(ws.frame(f"m{i}".encode()) for i in range(50)))
            assert await _payloads(ws, 50) == [f"m{i}".encode() for i in range(50)]
            await ws.aclose()
            nursery.cancel_scope.cancel()


async def test_a_ping_is_answered_and_a_close_ends_the_socket() -> None:
    """The server's ping gets its pong (ping() returns), and its close raises ConnectionClosed."""
    pinged = trio.Event()

    async def ping_then_close(request: WebSocketRequest) -> None:
        ws = await request.accept()
        await ws.send_message("before")
        await ws.ping(b"hi")  # returns only once the matching pong came back
        pinged.set()
        await ws.aclose(code=4001, reason="done")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            ws = await open_load_socket(await _serve(ping_then_close, nursery))
            assert await ws.receive_payloads() == [b"before"]
            with pytest.raises(ConnectionClosed) as closed:
                await ws.receive_payloads()
            assert pinged.is_set()
            assert closed.value.reason.code == 4001
            await ws.aclose()
            nursery.cancel_scope.cancel()
