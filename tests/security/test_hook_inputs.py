"""The hook answers any input with exit status 0: long or odd cwd, NUL, lone surrogates (finding 6).

In-process runs against the fake daemon (a real unix socket answering from a table), plus one
real process for the long ``cwd`` the finding reproduced.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crosstalk.core.dialects import CLIENTS
from crosstalk.hook.main import run
from crosstalk.paths import Home
from tests.conftest import SHORT_SCRATCH
from tests.hook.fake_daemon import FakeDaemon

ODD_STRINGS = [
    "/" + "a" * 5000,
    "/" + "/".join(["b" * 250] * 40),
    "/tmp/\x00nul",
    "\ud800",
    "/tmp/\udfff/x",
    "",
    "x" * 100_000,
]


@pytest.fixture(scope="module")
def home() -> Iterator[Home]:
    """A short state directory with an identity file and a fake daemon answering everything."""
    root = Path(tempfile.mkdtemp(prefix="ct-hk-", dir=SHORT_SCRATCH))
    (root / "identity.json").write_text("{}")
    fake = FakeDaemon(root / "daemon.sock", {"notices": lambda r: {"notices": []}})
    old = os.environ.get("CROSSTALK_HOME")
    os.environ["CROSSTALK_HOME"] = str(root)
    yield Home(root)
    if old is None:
        os.environ.pop("CROSSTALK_HOME", None)
    else:
        os.environ["CROSSTALK_HOME"] = old
    fake.close()
    shutil.rmtree(root, ignore_errors=True)


def event_for(client: str, session: Any, cwd: Any) -> str:
    if client == "cursor":
        data = {"hook_event_name": "sessionStart", "session_id": session, "workspace_roots": [cwd]}
    elif client == "goose":
        data = {"event": "Stop", "session_id": session, "working_dir": cwd}
    elif client == "agy":
        data = {"conversationId": session, "workspacePaths": [cwd]}
    else:
        data = {"hook_event_name": "SessionStart", "session_id": session, "cwd": cwd}
    return json.dumps(data)


@pytest.mark.parametrize("odd", ODD_STRINGS, ids=range(len(ODD_STRINGS)))
@pytest.mark.parametrize("client", ["claude", "cursor", "goose", "agy"])
def test_an_odd_cwd_or_session_still_exits_zero(home: Home, client: str, odd: str) -> None:
    """A cwd past PATH_MAX, with NUL or a lone surrogate, answers valid JSON with status 0."""
    for session, cwd in (("s-1", odd), (odd or "s", "/tmp")):
        out, status = run(["--client", client], time.monotonic(), event_for(client, session, cwd))
        assert status == 0
        assert isinstance(json.loads(out), dict)


json_scalars = st.none() | st.booleans() | st.integers() | st.text() | st.sampled_from(ODD_STRINGS)


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    client=st.sampled_from(CLIENTS),
    session=json_scalars,
    cwd=json_scalars,
    extra=st.dictionaries(st.text(max_size=12), json_scalars, max_size=4),
)
def test_fuzzed_session_and_cwd_always_exit_zero(
    home: Home, client: str, session: Any, cwd: Any, extra: dict[str, Any]
) -> None:
    """Any session id and cwd (any JSON type, any string) gets a JSON answer and status 0."""
    payload = json.loads(event_for(client, session, cwd)) | extra
    out, status = run(["--client", client], time.monotonic(), json.dumps(payload))
    assert status == 0
    assert isinstance(json.loads(out), dict)


def test_the_hook_process_exits_zero_on_a_cwd_past_path_max(home: Home) -> None:
    """The finding as reproduced: a real ``crosstalk-hook`` with a 5,000-character cwd exits 0."""
    stdin = event_for("claude", "s-long", "/" + "a" * 5000)
    env = dict(os.environ, CROSSTALK_HOME=str(home.root))
    done = subprocess.run(
        [sys.executable, "-m", "crosstalk.hook.main", "--client", "claude", "SessionStart"],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout), dict)
