"""The control server in-process: request/reply ops, stream ops, hang-ups and handler bugs."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from crosstalk.actors.control import ControlServer, OpTable
from crosstalk.actors.supervisor import Supervisor
from crosstalk.errors import NoAnswer, WrongWords
from crosstalk.wire.control.spec import OpSpec
from tests.conftest import SHORT_SCRATCH


@attrs.frozen
class Echo:
    text: str


@attrs.frozen
class Count:
    upto: int


@attrs.frozen
class Value:
    value: int


def _spec(name: str, params: type[Any], *, stream: bool = False) -> OpSpec[Any]:
    return OpSpec(name, params, (NoAnswer,), "A test op.", reply=Value if stream else Echo,
                  stream=stream)


async def _echo(params: Echo) -> Echo:
    return params


async def _buggy(_: Echo) -> Echo:
    raise ZeroDivisionError("a bug")


async def _refuse(_: Echo) -> Echo:
    raise NoAnswer("Nobody answered.")


async def _undeclared(_: Echo) -> Echo:
    raise WrongWords("Those were not the words.")  # planted: its spec declares only NoAnswer


async def _mistyped(_: Echo) -> Value:
    return Value(1)  # planted: its spec's reply is Echo


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
    root = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))
    fx = Fixture(root / "s.sock")
    ops = OpTable()
    ops.add(_spec("echo", Echo), _echo)
    ops.add(_spec("buggy", Echo), _buggy)
    ops.add(_spec("refuse", Echo), _refuse)
    ops.add(_spec("hold", Echo), fx.hold)
    ops.add(_spec("undeclared", Echo), _undeclared)
    ops.add(_spec("mistyped", Echo), _mistyped)  # type: ignore[arg-type]
    ops.add_stream(_spec("count", Count, stream=True), fx.count)
    ops.add_stream(_spec("forever", Count, stream=True), fx.forever)
    async with trio.open_nursery() as nursery:
        supervisor = Supervisor(heartbeat=5.0)
        await nursery.start(supervisor.run)
        await supervisor.start_actor("control", ControlServer(fx.path, ops))
        yield fx
        nursery.cancel_scope.cancel()
    shutil.rmtree(root, ignore_errors=True)


async def _lines(stream: trio.abc.Stream, count: int) -> list[dict[str, object]]:
    buffer = b""
    with trio.fail_after(10):
        while buffer.count(b"\n") < count:
            chunk = await stream.receive_some(65536)
            assert chunk, "the server closed the connection early"
            buffer += chunk
    return [json.loads(line) for line in buffer.splitlines()]


async def _send(stream: trio.abc.Stream, **request: object) -> None:
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


async def test_an_error_the_spec_does_not_declare_is_logged_as_a_bug(
    server: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    """Planted: an op raising a code its spec leaves out still answers that code, and the
    server logs it at ERROR naming the op and the code."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="refuse", text="x")
        await _send(stream, op="undeclared", text="x")
        refused, undeclared = await _lines(stream, 2)
    assert refused["error"]["code"] == "no_answer"  # type: ignore[index]
    assert undeclared["error"]["code"] == "wrong_words"  # type: ignore[index]
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["op 'undeclared' raised 'wrong_words' (WrongWords), which its spec does "
                      "not declare"]


async def test_a_reply_of_another_model_is_answered_as_a_bug(server: Fixture) -> None:
    """Planted: a handler returning another model than its spec's reply gets an internal
    error, not a reply of the wrong shape."""
    async with await trio.open_unix_socket(str(server.path)) as stream:
        await _send(stream, op="mistyped", text="x")
        (reply,) = await _lines(stream, 1)
    assert reply["error"]["code"] == "internal"  # type: ignore[index]


def test_a_spec_and_a_handler_that_disagree_on_streaming_are_refused() -> None:
    """A stream spec given a request/reply handler is a programming error at registration."""
    with pytest.raises(ValueError, match="disagree on streaming"):
        OpTable().add(_spec("count", Count, stream=True), _echo)  # type: ignore[arg-type]


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
    ops.add(_spec("echo", Echo), _echo)
    with pytest.raises(ValueError, match="registered twice"):
        ops.add_stream(_spec("echo", Count, stream=True), Fixture(Path("x")).count)


async def test_an_op_run_from_inside_the_daemon_returns_its_reply_model() -> None:
    """``run`` hands the params model to the handler and returns the reply model; planted: a
    handler returning another model is refused, not passed on to the calling feature."""
    ops = OpTable()
    ops.add(_spec("echo", Echo), _echo)
    ops.add(_spec("mistyped", Echo), _mistyped)  # type: ignore[arg-type]
    assert await ops.run(_spec("echo", Echo), Echo("hi"), Echo) == Echo("hi")
    with pytest.raises(TypeError, match="returned Value, not Echo"):
        await ops.run(_spec("mistyped", Echo), Echo("hi"), Echo)


async def test_a_listener_of_memory_streams_gets_the_same_replies() -> None:
    """``listen=`` swaps the unix socket for in-memory streams (the simulation's seam): the
    same lines get the same replies, a handler's bug included."""
    from tests.sim.door import Door

    door, ops = Door(), OpTable()
    ops.add(_spec("echo", Echo), _echo)
    ops.add(_spec("bad", Echo), _buggy)
    async with trio.open_nursery() as nursery:
        server = ControlServer(Path("unused"), ops, listen=door.listen)
        await nursery.start(_serve_in_memory, server)
        async with door.connect() as stream:
            await _send(stream, op="echo", text="hi")
            await _send(stream, op="bad", text="x")
            echo, bug = await _lines(stream, 2)
        nursery.cancel_scope.cancel()
    assert echo == {"ok": True, "text": "hi"}
    assert bug["error"]["code"] == "internal"  # type: ignore[index]


async def _serve_in_memory(
    server: ControlServer, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    supervisor = Supervisor(heartbeat=5.0)
    async with trio.open_nursery() as nursery:
        await nursery.start(supervisor.run)
        await supervisor.start_actor("control", server)
        task_status.started()
