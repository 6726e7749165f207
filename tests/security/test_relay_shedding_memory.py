"""After shedding idle unauthenticated connections, relay memory returns near its start (issue 20,
finding 2: 10,000 such connections took the relay from 44 to 348 MiB and kept it there).

The relay is the real one in its own process (``crosstalk relay serve``), so its resident set
size is its own, read from ``/proc/PID/status``. 2,000 WebSocket connections from this process
never say hello; we wait (bounded) until the relay has closed every one, check that a real
client still authenticates, and compare the relay's RSS with its RSS before the flood.

The bound. Holding the connections cost about 30 KiB each in the finding (304 MiB for 10,000),
so 2,000 held for ever would be about 60 MiB. Freed memory does not all go back to the system
(CPython keeps arenas that still hold a live object, and glibc keeps heap it cannot trim), so
"near its start" allows half of that: 32 MiB. A relay that kept the connections, or their
buffers, would exceed it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from relay.main import HELLO_TIMEOUT_ENV
from tests.relay.client import Identity, open_client
from tests.relay.process import RelayProcess
from tests.security.test_relay_shedding import IDLE, Idle

SLACK_KIB = 32 * 1024
HELLO_TIMEOUT = 2.0


def rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
    assert found, status
    return int(found.group(1))


@pytest.fixture
def relay(tmp_path: Path) -> Iterator[RelayProcess]:
    """The relay, shedding a connection that has not said hello after HELLO_TIMEOUT seconds (the
    last 64 of the flood wait that out; 10 s by default)."""
    proc = RelayProcess(tmp_path / "relay-data", tmp_path / "relay.stderr",
                        env={HELLO_TIMEOUT_ENV: str(HELLO_TIMEOUT)})
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
async def test_relay_memory_returns_near_its_start_after_shedding(relay: RelayProcess) -> None:
    """2,000 idle unauthenticated connections, all closed by the relay: its RSS ends within
    32 MiB of where it started (see the module docstring for why that bound)."""
    assert relay.proc is not None
    pid = relay.proc.pid
    with trio.fail_after(60):
        async with open_client(relay.port, Identity()):
            pass  # warm: the relay has loaded and run the code a real client needs
    before = rss_kib(pid)
    idle = Idle()
    peak = before
    with trio.fail_after(300):
        async with trio.open_nursery() as flood:
            for _ in range(IDLE):
                flood.start_soon(idle.hold, relay.port)
                await trio.lowlevel.checkpoint()
            await idle.all_closed.wait()
            peak = max(peak, rss_kib(pid))
        async with open_client(relay.port, Identity()):
            pass  # still serving real clients
    after = rss_kib(pid)
    print(f"relay RSS: before {before} KiB, peak seen {peak} KiB, after {after} KiB")
    assert len(idle.reasons) == IDLE
    assert after - before <= SLACK_KIB, (before, peak, after)
