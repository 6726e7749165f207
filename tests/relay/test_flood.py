"""One address floods a real relay with throwaway identities; someone elsewhere still pairs.

The attacker (:mod:`tests.relay.flood`, its own process, every socket bound to 127.0.0.5) opens
thousands of authenticated connections, each a fresh identity, and tries to fill pairing slots
by opening with one throwaway and joining with another, paying the proof of work only when
asked. Meanwhile two people at 127.0.0.1 pair through the same relay. On both kinds of relay
(SQLite, and a node on NATS JetStream):

* the pairing completes in under 5 s while the flood runs;
* the relay never holds more than its per-address cap of the flood's connections, and the
  flood fills no more slots than its address's burst;
* once the flood lets go, the relay's RSS is within 20% of what it was before.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from crosstalk.wire import relay as w
from relay.limits import RelayConfig
from tests.relay.client import Identity, open_client
from tests.relay.nats_process import require_nats_server, running_nats
from tests.relay.process import ROOT, RelayProcess

pytestmark = pytest.mark.e2e

FLOOD_CONNECTIONS = 2000
FLOOD_SLOT_TRIES = 30
ATTACKER = "127.0.0.5"
WARM_CLIENTS = 40
POLL = 0.05  # seconds between looks at the relay's /metrics (each is an HTTP request)
DEFAULTS = RelayConfig()


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def _metrics(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {name: float(value) for name, _, value in
            (line.partition(" ") for line in text.splitlines() if line and line[0] != "#")}


async def _until(condition: object, *, within: float, what: str) -> None:
    """Poll ``condition`` (a blocking call, on a thread) until true; fail after ``within``."""
    assert callable(condition)
    # The relay is another process: nothing here can be awaited for it, so this polls its
    # /metrics (each look an HTTP request), as tests.e2e.conftest.wait_until polls.
    with trio.move_on_after(within):
        while True:
            if await trio.to_thread.run_sync(condition):
                return
            await trio.sleep(POLL)
    raise AssertionError(f"timed out after {within} s waiting for {what}")


async def _visit(port: int) -> None:
    """An honest client connects, resumes and leaves."""
    async with open_client(port, Identity()) as client:
        assert client.resumed is not None


async def _pair(port: int) -> float:
    """Two people at 127.0.0.1 pair (paying the work), trade a slot part; the seconds it took."""
    started = time.monotonic()
    async with open_client(port, Identity()) as a, open_client(port, Identity()) as b:
        slot = await a.ok(w.SlotOpen(a.next_req()))
        assert isinstance(slot, w.Slot)
        joined = await b.ok(w.SlotJoin(b.next_req(), slot.slot))
        assert isinstance(joined, w.SlotJoined) and joined.fingerprint == a.me.fp
        await a.ok(w.SlotSend(a.next_req(), slot.slot, 0, b"offer"))
        got = await b.push(w.SlotMsg)
        assert isinstance(got, w.SlotMsg) and got.data == b"offer"
        await a.ok(w.SlotClose(a.next_req(), slot.slot))
    return time.monotonic() - started


@pytest.fixture(params=["sqlite", "nats"])
def relay(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RelayProcess]:
    """A relay with every limit at its default: the SQLite relay, or a node on NATS."""
    if request.param == "sqlite":
        proc = RelayProcess(tmp_path / "data", tmp_path / "relay.stderr")
        proc.start()
        try:
            yield proc
        finally:
            proc.kill(signal.SIGTERM)
        return
    require_nats_server()
    with contextlib.contextmanager(running_nats)(tmp_path / "nats") as server:
        proc = RelayProcess(tmp_path / "data", tmp_path / "relay.stderr", "--nats", server.url)
        proc.start()
        try:
            yield proc
        finally:
            proc.kill(signal.SIGTERM)


async def test_one_address_flooding_cannot_crowd_out_a_pairing_or_keep_memory(
    relay: RelayProcess,
) -> None:
    """A flood from one address is held to its caps, a pairing elsewhere completes in under
    5 s meanwhile, and the relay's memory comes back afterwards."""
    assert relay.proc is not None
    pid, port = relay.proc.pid, relay.port
    # "Before" is a relay in service: it has seen a pairing and a few dozen clients come and
    # go (a fresh process first builds its lazily made state: about 3 MB for the first 60).
    await _pair(port)
    async with trio.open_nursery() as nursery:
        for _ in range(WARM_CLIENTS):
            nursery.start_soon(_visit, port)
    await _until(lambda: _metrics(port)["crosstalk_relay_connections"] == 0, within=10,
                 what="the warm-up's connections to close")
    before = _rss_kib(pid)
    flood = await trio.lowlevel.open_process(
        [sys.executable, "-m", "tests.relay.flood", str(port), ATTACKER,
         str(FLOOD_CONNECTIONS), str(FLOOD_SLOT_TRIES), "--within", "90"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT,
    )
    try:
        with trio.fail_after(120):
            await _until(lambda: _metrics(port)["crosstalk_relay_authenticated_connections"]
                         >= DEFAULTS.max_per_source // 2, within=60, what="the flood to build")
            took = await _pair(port)
            held = await _holding(flood)
            peak = await trio.to_thread.run_sync(_metrics, port)
            assert flood.stdin is not None
            await flood.stdin.send_all(b"let go\n")
            final = json.loads((await _read_line(flood)).decode())
            await flood.wait()
    finally:
        if flood.returncode is None:
            flood.kill()
        with trio.move_on_after(10) as reaping:
            reaping.shield = True
            await flood.wait()  # reaped here, not warned about by a later test's collector
    assert took < 5.0, f"the pairing took {took:.1f} s during the flood"
    assert held["authenticated"] > 5 * DEFAULTS.max_per_source, held  # it did try
    assert held.get("shed", 0) >= held["authenticated"] - DEFAULTS.max_per_source - 2, held
    assert peak["crosstalk_relay_authenticated_connections"] <= DEFAULTS.max_per_source + 2
    assert peak["crosstalk_relay_shed_total"] >= held.get("shed", 0), peak
    filled = final.get("slots_filled", 0)
    assert 0 < filled <= DEFAULTS.slot_burst // 2, final  # an open and a join each
    assert final.get("open_refused:rate_limited", 0) > 0, final
    await _until(lambda: _metrics(port)["crosstalk_relay_connections"] == 0, within=30,
                 what="the flood's connections to close")
    await _until(lambda: _metrics(port)["crosstalk_relay_memory_trims_total"] >= 1, within=10,
                 what="the relay to give memory back")
    after = _rss_kib(pid)
    print(f"pairing {took:.2f} s; flood {held} then {final}; RSS {before} -> {after} KiB")
    assert after <= before * 1.2, f"RSS {before} KiB before the flood, {after} KiB after"


async def _read_line(proc: trio.Process) -> bytes:
    assert proc.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(4096)
        if not chunk:
            raise AssertionError(f"the flood ended early: {line!r}")
        line += chunk
    return line


async def _holding(proc: trio.Process) -> dict[str, int]:
    counts: dict[str, int] = json.loads((await _read_line(proc)).decode())
    assert counts.pop("holding") is True
    return counts
