"""The control socket's gate while the daemon starts: `status` at once, other ops once open."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from crosstalk.actors.control import ControlServer, OpTable
from crosstalk.actors.control_gate import DaemonStarting, OpGate, StartingStatus
from crosstalk.actors.supervisor import Supervisor
from crosstalk.wire.control.spec import OpSpec
from crosstalk.wire.converter import unstructure
from tests.conftest import SHORT_SCRATCH


@attrs.frozen
class Echo:
    text: str


async def _echo(params: Echo) -> Echo:
    return params


def _table() -> OpTable:
    table = OpTable()
    table.add(OpSpec("echo", Echo, (), "Echo.", reply=Echo), _echo)
    table.add(OpSpec("status", Echo, (), "Echo.", reply=Echo), _echo)
    return table


async def _status(gate: OpGate) -> dict[str, object]:
    table = await gate.table_for("status")
    return await table.call("status", {})


async def test_status_while_starting_names_the_parts_still_starting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Before the gate opens, `status` comes from the gate and lists what has not started."""
    gate = OpGate("/home/x")
    await trio.sleep(0.25)
    first = await _status(gate)
    gate.done("store")
    second = await _status(gate)
    assert first["starting"] == ["store", "features"]
    assert first["uptime_s"] == 0.25
    assert first["home"] == "/home/x"
    assert first["relay"] == {
        "url": None, "connected": False, "state": "not started", "last_error": None
    }
    assert second["starting"] == ["features"]


async def test_an_op_waits_for_the_gate_to_open_then_runs_on_the_daemons_table(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request other than `status` is held until the daemon opens the gate, then served."""
    gate = OpGate("/home/x", wait=30.0)
    table = _table()
    served_at: list[float] = []

    async def ask() -> None:
        assert await gate.table_for("echo") is table
        served_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.sleep(2.0)
        assert served_at == []
        gate.open(table)
    assert served_at == [2.0]
    assert await gate.table_for("status") is table  # once open, the daemon answers status too


async def test_an_op_gets_daemon_starting_when_the_start_outlasts_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Past the bound, a waiting request is refused with `daemon_starting`, naming the part."""
    gate = OpGate("/home/x", wait=30.0)
    gate.done("store")
    with pytest.raises(DaemonStarting) as refused:
        await gate.table_for("echo")
    assert trio.current_time() == 30.0
    assert refused.value.code == "daemon_starting"
    assert "(features)" in refused.value.message


async def test_the_control_server_behind_the_gate_answers_status_then_serves_held_requests(
) -> None:
    """Over the socket: `status` answers while starting; an `echo` sent before the gate opens is
    answered once it does, by the daemon's table."""
    root = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))
    path = root / "s.sock"
    gate = OpGate(str(root))
    try:
        async with trio.open_nursery() as nursery:
            supervisor = Supervisor(heartbeat=5.0)
            await nursery.start(supervisor.run)
            await supervisor.start_actor("control", ControlServer(path, gate))
            async with await trio.open_unix_socket(str(path)) as stream:
                await stream.send_all(b'{"v": 1, "op": "status"}\n{"v": 1, "op": "echo", '
                                      b'"text": "held"}\n')
                with trio.fail_after(10):
                    status = json.loads(await _line(stream))
                    gate.open(_table())
                    echoed = json.loads(await _line(stream))
            nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert status["ok"] is True and status["starting"] == ["store", "features"]
    assert echoed == {"ok": True, "text": "held"}


async def _line(stream: trio.SocketStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(1)
        assert chunk, "the server closed the connection early"
        data += chunk
    return data


def test_the_starting_status_record_has_the_fields_clients_read() -> None:
    """`status` while starting carries pid and relay, as `ensure_daemon` and the CLI read them."""
    record = unstructure(StartingStatus(pid=7, version="v", home="h", uptime_s=0.0, starting=[]))
    assert {"pid", "relay", "starting"} <= set(record)
