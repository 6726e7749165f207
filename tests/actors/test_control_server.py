"""The control server in-process: request/reply ops, stream ops, hang-ups and handler bugs."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from crosstalk.actors.control import ControlServer, OpTable
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import NoAnswer


@attrs.frozen
class Echo:
    text: str


@attrs.frozen
class Count:
    upto: int


@attrs.frozen
class Value:
    value: int


async def _echo(params: Echo) -> Echo:
    return params


async def _buggy(_: Echo) -> Echo:
    raise ZeroDivisionError("a bug")


async def _refuse(_: Echo) -> Echo:
    raise NoAnswer("Nobody answered.")


class Fixture:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.stream_finished = trio.Event()
        self.stream_cancelled = trio.Event()
        self.held = trio.Event()
        self.release = trio.Event()
        self.replied = trio.Event()

    async def hold(self, params: Echo) -> Echo:
        """Answers once released, so a test can hang up while the op runs."""
        self.held.set()
        await self.release.wait()
        self.replied.set()
        return params

    async def count(self, params: Count) -> AsyncGenerator[Value, None]:
        for i in range(params.upto):
            yield Value(i)

    async def forever(self, _: Count) -> AsyncGenerator[Value, None]:
        try:
            yield Value(0)
            await trio.sleep_forever()
            yield Value(1)  # never reached
        except trio.Cancelled:
            self.stream_cancelled.set()
            raise


@pytest.fixture
async def server() -> AsyncIterator[Fixture]:
    root = Path(tempfile.mkdtemp(prefix="ct-", dir="/tmp"))
    fx = Fixture(root / "s.sock")
    ops = OpTable()
    ops.add("echo", Echo, _echo)
    ops.add("buggy", Echo, _buggy)
    ops.add("refuse", Echo, _refuse)
    ops.add("hold", Echo, fx.hold)
    ops.add_stream("count", Count, fx.count)
    ops.add_stream("forever", Count, fx.forever)
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        await supervisor.start_actor("control", ControlServer(fx.path, ops))
        yield fx
        nursery.cancel_scope.cancel()
    shutil.rmtree(root, ignore_errors=True)


async def _lines(stream: trio.SocketStream, count: int) -> list[dict[str, object]]:
    buffer = b""
    with trio.fail_after(10):
        while buffer.count(b"\n") < count:
            chunk = await stream.receive_some(65536)
            assert chunk, "the server closed the connection early"
            buffer += chunk
    return [json.loads(line) for line in buffer.splitlines()]


async def _send(stream: trio.SocketStream, **request: object) -> None:
    await stream.send_all(json.dumps({"v": 1, **request}).encode() + b"\n")


async def test_request_reply_op_answers_with_its_record(server: Fixture) -> None:
    """A plain op replies once with ok and the handler's fields."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="echo", text="hi")
        assert await _lines(stream, 1) == [{"ok": True, "text": "hi"}]


async def test_wrongly_typed_params_get_invalid_request(server: Fixture) -> None:
    """Params that do not fit the op's model are refused with one error line."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="echo", text=5)
        (reply,) = await _lines(stream, 1)
        assert reply["ok"] is False
        assert reply["error"]["code"] == "protocol_error"  # type: ignore[index]


async def test_stream_op_sends_one_line_per_record_then_serves_the_next_request(
    server: Fixture,
) -> None:
    """A stream op's records arrive in order; the connection then answers the next request."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="count", upto=3)
        await _send(stream, op="echo", text="after")
        replies = await _lines(stream, 4)
        assert replies == [
            {"ok": True, "value": 0},
            {"ok": True, "value": 1},
            {"ok": True, "value": 2},
            {"ok": True, "text": "after"},
        ]


async def test_hanging_up_cancels_a_running_stream(server: Fixture) -> None:
    """A client that closes its connection mid-stream cancels the stream's handler."""
    stream = await trio.open_unix_socket(str(server.path))
    await _send(stream, op="forever", upto=0)
    assert await _lines(stream, 1) == [{"ok": True, "value": 0}]
    await stream.aclose()
    with trio.fail_after(10):
        await server.stream_cancelled.wait()


async def test_handler_bug_is_answered_and_the_connection_lives_on(server: Fixture) -> None:
    """A handler that raises a non-crosstalk error gets an internal error reply, not a drop."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="buggy", text="x")
        await _send(stream, op="refuse", text="x")
        await _send(stream, op="echo", text="still here")
        bug, refused, echo = await _lines(stream, 3)
        assert bug["error"]["code"] == "internal"  # type: ignore[index]
        assert refused["error"] == {"code": "no_answer", "message": "Nobody answered."}
        assert echo == {"ok": True, "text": "still here"}


async def test_a_client_hanging_up_before_its_reply_is_a_quiet_debug_line(
    server: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    """A client gone before its reply: one DEBUG line, no ERROR or traceback, others served."""
    caplog.set_level(logging.DEBUG, logger="crosstalk.actors.control")
    stream = await trio.open_unix_socket(str(server.path))
    await _send(stream, op="hold", text="never read")
    with trio.fail_after(10):
        await server.held.wait()
    await stream.aclose()
    server.release.set()
    await server.replied.wait()
    await trio.testing.wait_all_tasks_blocked()  # the server has tried to write the reply
    records = [r for r in caplog.records if r.name == "crosstalk.actors.control"]
    assert not [r.getMessage() for r in records if r.levelno >= logging.WARNING]
    assert not any(r.exc_info for r in records)
    assert [r.getMessage() for r in records if r.levelno == logging.DEBUG] == [
        "control: client hung up before the reply to 'hold'"
    ]
    async with await trio.open_unix_socket(str(server.path)) as other:
        await _send(other, op="echo", text="still serving")
        assert await _lines(other, 1) == [{"ok": True, "text": "still serving"}]


def test_an_op_name_can_be_registered_only_once() -> None:
    """Registering two handlers under one name is a programming error."""
    ops = OpTable()
    ops.add("echo", Echo, _echo)
    with pytest.raises(ValueError, match="registered twice"):
        ops.add_stream("echo", Echo, Fixture(Path("x")).count)  # type: ignore[arg-type]
