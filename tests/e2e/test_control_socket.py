"""The control socket against a real daemon: bad input gets an error reply, never an outage."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import Cli, stop_pid


@pytest.fixture(scope="module")
def daemon() -> Iterator[Cli]:
    """One real daemon shared by this module's tests."""
    root = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))
    cli = Cli(root / "home")
    cli.json("daemon", "start")
    yield cli
    pid = cli.daemon_pid()
    if pid:
        stop_pid(pid)
    shutil.rmtree(root, ignore_errors=True)


def _exchange(sock_path: Path, payload: bytes, *, timeout: float = 10.0) -> list[dict[str, object]]:
    """Send raw bytes, half-close, and return every reply line the daemon sent back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(sock_path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _status_ok(cli: Cli) -> bool:
    return control.request(cli.home / "daemon.sock", "status", timeout=10.0)["ok"] is True


def test_status_op_answers(daemon: Cli) -> None:
    """A well-formed status request gets the daemon's pid and version."""
    reply = control.request(daemon.home / "daemon.sock", "status", timeout=10.0)
    assert reply["pid"] == daemon.daemon_pid()
    assert reply["version"]


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json", "invalid_request"),
        (b"[1, 2, 3]", "invalid_request"),
        (b'{"op": "status"}', "invalid_request"),
        (b'{"v": 2, "op": "status"}', "invalid_request"),
        (b'{"v": 1}', "invalid_request"),
        (b'{"v": 1, "op": 7}', "invalid_request"),
        (b'{"v": 1, "op": "no-such-op"}', "unknown_op"),
        (b"\xff\xfe\x00garbage", "invalid_request"),
    ],
)
def test_malformed_request_gets_error_reply(daemon: Cli, line: bytes, code: str) -> None:
    """Each malformed line gets one error reply with a stable code and a sentence."""
    (reply,) = _exchange(daemon.home / "daemon.sock", line + b"\n")
    assert reply["ok"] is False
    assert reply["error"]["code"] == code
    assert reply["error"]["message"].endswith(".")


def test_bad_line_does_not_spoil_the_connection(daemon: Cli) -> None:
    """After a bad line, the next request on the same connection is answered normally."""
    replies = _exchange(daemon.home / "daemon.sock", b'garbage\n{"v": 1, "op": "status"}\n')
    assert [r["ok"] for r in replies] == [False, True]


def test_oversized_request_is_refused_and_daemon_keeps_serving(daemon: Cli) -> None:
    """A request over 1 MiB gets too_large, and the daemon keeps answering others."""
    replies = _exchange(daemon.home / "daemon.sock", b"x" * (1024 * 1024 + 1))
    assert replies[0]["error"]["code"] == "too_large"
    assert _status_ok(daemon)


def test_unknown_op_raises_through_client(daemon: Cli) -> None:
    """The stdlib client turns an error reply into a CrosstalkError carrying the code."""
    with pytest.raises(CrosstalkError) as info:
        control.request(daemon.home / "daemon.sock", "frobnicate", timeout=10.0)
    assert info.value.code == "unknown_op"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)
requests = st.fixed_dictionaries(
    {
        "v": st.sampled_from([1, 1, 1, 0, "1", None]),
        "op": st.sampled_from(["status", "health", "", "x"]) | st.text(max_size=10),
    },
    optional={"extra": json_values, "to": json_values},
).map(lambda d: json.dumps(d).encode())
lines = (
    st.binary(max_size=300).map(lambda b: b.replace(b"\n", b" "))
    | requests
    | json_values.map(lambda v: json.dumps(v).encode())
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(lines, min_size=1, max_size=5))
def test_fuzzed_requests_never_take_the_daemon_down(daemon: Cli, batch: list[bytes]) -> None:
    """Any batch of lines gets exactly one JSON reply per non-blank line; the daemon survives."""
    payload = b"".join(line + b"\n" for line in batch)
    replies = _exchange(daemon.home / "daemon.sock", payload)
    assert len(replies) == sum(1 for line in batch if line.strip())
    assert all(isinstance(r.get("ok"), bool) for r in replies)
    assert _status_ok(daemon)
