"""A relay node groups a sender's queued posts by reading trio-websocket's own queue of received
messages (``relay.node._received``), which has no public call: these tests pin that assumption
to the installed trio-websocket, so an upgrade that breaks it fails here, not silently."""

from __future__ import annotations

import trio
from trio_websocket import WebSocketRequest, open_websocket_url, serve_websocket

from relay.node import _received


async def test_queued_messages_are_taken_without_waiting_and_none_when_empty() -> None:
    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        for text in ("one", "two", "three"):
            await ws.send_message(text)
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
            async with open_websocket_url(f"ws://127.0.0.1:{server.port}") as ws:
                assert await ws.get_message() == "one"
                got = []
                while len(got) < 2:  # the rest arrive in order; each is taken once queued
                    message = _received(ws)
                    if message is None:
                        await trio.sleep(0.001)
                    else:
                        got.append(message)
                assert got == ["two", "three"]
                assert _received(ws) is None
            nursery.cancel_scope.cancel()
