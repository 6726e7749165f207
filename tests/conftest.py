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


def _scratch_in_memory() -> str:
    """Where tests make scratch directories: tmpfs (/dev/shm) when it has room, else /tmp.

    Every commit of a real daemon's store is fsynced (synchronous=FULL); on a disk shared with
    other work those waits, not CPU, were a large part of the suite's time (the simulation's
    seeds ran 1.3-1.9x longer in wall time on /tmp). Nothing here simulates a power loss, only
    processes dying, which tmpfs survives as a disk does. ``CROSSTALK_TEST_DISK=1`` keeps
    everything on /tmp; a TMPDIR already set is kept."""
    shm = Path("/dev/shm")
    if os.environ.get("CROSSTALK_TEST_DISK") or "TMPDIR" in os.environ:
        return "/tmp"
    try:
        room = os.statvfs(shm)
    except OSError:
        return "/tmp"
    if room.f_bavail * room.f_frsize < 4 << 30 or not os.access(shm, os.W_OK):
        return "/tmp"
    root = shm / f"crosstalk-tests-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    made = root.stat()
    if made.st_uid != os.getuid() or made.st_mode & 0o077:
        return "/tmp"  # not ours alone: someone else made it
    os.environ["TMPDIR"] = str(root)  # pytest's tmp_path, and every process a test starts
    tempfile.tempdir = None
    return str(shm)


#: The parent of short scratch paths (unix sockets are limited to 107 bytes).
SHORT_SCRATCH = _scratch_in_memory()

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


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than cores (``--maxprocesses`` still caps it). Most
    end-to-end tests spend much of their time waiting on real processes, sockets and heartbeats;
    a third worker on two cores fills those waits (the whole suite: 1,104 s on two workers,
    866 s on three, the same commit, nothing else on the machine)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The simulation's long runs first, so that with several workers (pytest-xdist) one of them
    starts on it at once instead of finishing the suite alone with it."""
    def rank(item: pytest.Item) -> int:
        return 0 if item.nodeid.startswith("tests/sim/test_sim.py") else int(
            not item.nodeid.startswith("tests/sim/")) + 1

    items.sort(key=rank)
