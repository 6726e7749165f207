"""Shared fixtures, and a test session that never touches the user's own crosstalk."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Shared, noisy machines: hypothesis deadlines would make timing-dependent failures.
settings.register_profile("crosstalk", deadline=None)
settings.load_profile("crosstalk")
os.environ.pop("CROSSTALK_HOME", None)
os.environ.pop("CROSSTALK_RELAY", None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# A daemon with no relay configured starts the machine's shared local relay. In tests that relay
# lives on a port of its own, with its data in a scratch directory, so the suite never meets a
# relay someone is using (or leaves one behind): see `_local_relays_are_stopped` below.
_SCRATCH = Path(tempfile.mkdtemp(prefix="ct-xdg-"))
os.environ.setdefault("CROSSTALK_LOCAL_PORT", str(_free_port()))
os.environ["XDG_DATA_HOME"] = str(_SCRATCH)


@pytest.fixture(scope="session", autouse=True)
def _local_relays_are_stopped() -> Iterator[None]:
    """At the end of the session, stop (by pid) any relay a test's daemon started for itself."""
    yield
    for pid_file in _SCRATCH.rglob("relay.pid"):
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass
    shutil.rmtree(_SCRATCH, ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The simulation's long runs first, so that with several workers (pytest-xdist) one of them
    starts on it at once instead of finishing the suite alone with it."""
    def rank(item: pytest.Item) -> int:
        return 0 if item.nodeid.startswith("tests/sim/test_sim.py") else int(
            not item.nodeid.startswith("tests/sim/")) + 1

    items.sort(key=rank)
