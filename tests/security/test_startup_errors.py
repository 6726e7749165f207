"""Startup errors are one sentence with a code, never a traceback (finding 11)."""

from __future__ import annotations

import json
import math
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crosstalk.cli.output import startup_error
from crosstalk.errors import UsageError
from relay.main import ServeOptions, check_options
from tests.relay.nats_process import NatsServer, running_nats
from tests.relay.process import RelayProcess


def relay_serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crosstalk", "relay", "serve", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def one_error(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert "Traceback" not in done.stderr, done.stderr
    error: dict[str, str] = json.loads(done.stdout)["error"]
    assert error["message"].endswith(".") and "\n" not in error["message"]
    return error


def test_a_relay_whose_port_is_taken_says_so_in_one_sentence(tmp_path: Path) -> None:
    """``relay serve`` on a port in use exits 1 with cannot_start, no traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = relay_serve("--port", str(port), "--data", str(tmp_path / "relay"))
    assert done.returncode == 1
    error = one_error(done)
    assert error["code"] == "cannot_start" and "in use" in error["message"]


def test_an_error_inside_task_groups_is_its_sentence() -> None:
    """A CrosstalkError nested in exception groups is reported as itself; other bugs are not."""
    nested = ExceptionGroup("outer", [ExceptionGroup("inner", [UsageError("Bad key.")])])
    assert startup_error(nested) == nested.exceptions[0].exceptions[0]  # type: ignore[union-attr]
    assert startup_error(ExceptionGroup("g", [KeyError("x")])) is None


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    yield from running_nats(tmp_path / "nats")


def test_a_cluster_node_with_another_key_fails_in_one_sentence(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    """A second node with its own relay key exits with one sentence naming the fix."""
    first = RelayProcess(tmp_path / "n1", tmp_path / "n1.stderr", "--nats", nats_server.url)
    first.start()
    try:
        done = relay_serve("--port", "0", "--data", str(tmp_path / "n2"), "--nats", nats_server.url)
    finally:
        first.kill(signal.SIGTERM)
    assert done.returncode == 2
    error = one_error(done)
    assert error["code"] == "usage" and "relay key differs" in error["message"]


@pytest.mark.parametrize(
    "args",
    [["--port", "99999"], ["--port", "-1"], ["--retention", "-1"], ["--retention", "0"],
     ["--retention", "nan"], ["--op-rate", "0"], ["--nats-replicas", "0"]],
    ids=lambda args: " ".join(args),
)
def test_a_relay_option_no_relay_can_run_with_is_a_usage_error(
    tmp_path: Path, args: list[str]
) -> None:
    """``--port 99999`` (it bound 34463) or ``--retention -1``: exit 2, usage, no data dir."""
    data = tmp_path / "relay-data"
    done = relay_serve("--data", str(data), *args)
    assert done.returncode == 2, done.stdout + done.stderr
    error = one_error(done)
    assert error["code"] == "usage" and error["message"].startswith(args[0])
    assert not data.exists()


@given(port=st.integers(), retention=st.floats(), op_rate=st.floats())
def test_serve_options_are_taken_exactly_when_a_relay_can_run_with_them(
    port: int, retention: float, op_rate: float
) -> None:
    """Any port, retention and rate: taken exactly when the port fits and both are positive."""
    opts = ServeOptions(port=port, retention=retention, op_rate=op_rate)
    fine = 0 <= port <= 65535 and all(
        math.isfinite(value) and value > 0 for value in (retention, op_rate)
    )
    if fine:
        check_options(opts)
    else:
        with pytest.raises(UsageError):
            check_options(opts)
