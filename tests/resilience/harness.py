"""The scenario harness: people whose daemons reach the relay through the fault proxy, and a tally.

A scenario pairs real daemons (subprocesses, through the CLI), sends messages, injects a fault
(proxy command, ``kill -9``, ``SIGSTOP``, a full disk ...), then reads until every message whose
``send`` was answered has arrived or a bound runs out. The :class:`Tally` keeps the figures every
scenario reports and asserts:

* **sent** - sends the daemon answered (``queued`` or ``sent``): from then on the op is committed
  to the outbox, so DESIGN.md §4 promises its delivery;
* **unanswered** - sends that got no answer because the daemon was killed under them: they may
  or may not arrive, and neither outcome is a loss;
* **delivered** - distinct message ids the receiver's ``read`` returned;
* **lost** - answered sends never delivered (must be 0);
* **duplicated at the agent** - ids a receiver's ``read`` returned again after it had
  acknowledged them (must be 0). Reading is at least once: a read whose ``ack`` did not get
  through (a kill between the reply and the ack) hands the same ids out again, and the reader
  drops ids it already showed, as the CLI and MCP readers do; those are **redelivered**, counted
  apart, never shown twice;
* **echoed to sender** - the sender's own ``read`` returning a message it sent (a known bug,
  asserted on its own in test_echo.py; reported here, not counted as a delivery or duplicate);
* **restarts** - per person, per actor, from ``crosstalk doctor --json``, at the end.

Sends and reads go straight to the daemon's control socket (the same JSON line protocol the CLI
uses) so a few hundred of them fit the time budget; pairing, ``doctor`` and restarts go through
the CLI. Every wait is bounded; every process is stopped by its pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs

from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from tests.e2e.conftest import Person, read_json_line, stop_pid, wait_until

# The heartbeat the daemons under test run with unless a scenario says otherwise
# (CROSSTALK_HEARTBEAT, seconds): the product's default. The relay link's pings scale with it (a
# quarter of it each, at most 2 s), so a scenario whose waits are so many heartbeats may run at a
# shorter one (the sleeping laptop, the claim race); see docs/resilience.md.
HEARTBEAT = 5.0


class Peer(Person):
    """A person whose daemon runs with the test heartbeat, with fast control-socket helpers."""

    def __init__(self, home: Path, relay: str, *, heartbeat: float = HEARTBEAT) -> None:
        super().__init__(home, relay)
        self.heartbeat = heartbeat

    def _env(self) -> dict[str, str]:
        return {"CROSSTALK_HEARTBEAT": str(self.heartbeat)}

    def run(
        self, *args: str, timeout: float = 60.0, env: dict[str, str] | None = None, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        return super().run(*args, timeout=timeout, env={**self._env(), **(env or {})}, **kw)

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        env = {**os.environ, "CROSSTALK_RELAY": self.relay, **self._env()}
        env.pop("CROSSTALK_HOME", None)
        return subprocess.Popen(
            [sys.executable, "-m", "crosstalk", *args, "--home", str(self.home)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    @property
    def name(self) -> str:
        return self.home.name

    def call(self, op: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
        """One request on the daemon's control socket; CrosstalkError on a refusal."""
        return control.request(self.home / "daemon.sock", op, params, timeout=timeout)

    def actors(self) -> dict[str, dict[str, Any]]:
        """``crosstalk doctor --json`` actors by name (doctor exits 1 when one is unhealthy)."""
        proc = self.run("doctor", "--json")
        lines = [line for line in proc.stdout.splitlines() if line.strip()]
        assert lines, (proc.stdout, proc.stderr)
        return {a["name"]: a for a in json.loads(lines[-1])["actors"]}

    def restarts(self) -> dict[str, int]:
        return {name: int(a["restarts"]) for name, a in self.actors().items()}

    def start_daemon(self) -> int:
        return int(self.json("daemon", "start")["pid"])

    def stop_daemon(self) -> None:
        pid = self.daemon_pid()
        if pid:
            stop_pid(pid)


@attrs.define
class Tally:
    """What one scenario sent and what the receivers' reads returned."""

    name: str
    sent: dict[str, str] = attrs.Factory(dict)  # answered sends: id -> receiver name
    states: Counter[str] = attrs.Factory(Counter)  # answered sends by state
    unanswered: int = 0
    echoed: int = 0  # our own sent messages that our own read returned
    read_errors: list[str] = attrs.Factory(list)  # reads the daemon did not answer
    attempted: dict[str, str] = attrs.Factory(dict)  # every send tried: text -> receiver name
    refusals: Counter[str] = attrs.Factory(Counter)  # unanswered sends by error code
    refusal_messages: dict[str, str] = attrs.Factory(dict)  # the first message for each code
    seen: Counter[str] = attrs.Factory(Counter)
    acked: set[str] = attrs.Factory(set)  # ids whose ack the daemon confirmed
    redelivered: int = 0  # ids handed out again because their ack never got through
    restarts: dict[str, dict[str, int]] = attrs.Factory(dict)
    notes: dict[str, Any] = attrs.Factory(dict)
    oddities: list[dict[str, Any]] = attrs.Factory(list)  # duplicates and misaddressed reads
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def send(self, sender: Peer, to: Peer, text: str) -> str | None:
        """Send through the control socket; record the id if the daemon answered."""
        with self._lock:
            self.attempted[text] = to.name
        try:
            reply = sender.call("send", {"to": to.name, "text": text}, timeout=30.0)
        except (CrosstalkError, OSError) as exc:
            with self._lock:
                self.unanswered += 1
                code = getattr(exc, "code", type(exc).__name__)
                self.refusals[code] += 1
                self.refusal_messages.setdefault(code, str(exc))
            return None
        with self._lock:
            self.sent[reply["id"]] = to.name
            self.states[reply["state"]] += 1
        return str(reply["id"])

    def send_many(self, sender: Peer, to: Peer, texts: Sequence[str], workers: int = 8) -> None:
        """Several sends at once (a queued send waits up to 2 s for ``sent`` before answering)."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(lambda text: self.send(sender, to, text), texts))

    def read(self, peer: Peer) -> int:
        """One read by ``peer``, then its ack; counts every id it shows. Returns how many."""
        try:
            reply = peer.call("read", {})
        except (CrosstalkError, OSError) as exc:
            self.read_errors.append(f"{peer.name}: {exc}")
            return 0
        messages = reply["messages"]
        fresh = []
        for message in messages:
            if message["id"] in self.seen and message["id"] not in self.acked:
                self.redelivered += 1  # its ack never got through: the reader drops it by id
                continue
            fresh.append(message)
        self._show(peer, fresh)
        if reply.get("lease"):
            try:
                peer.call("ack", {"lease": reply["lease"]})
            except (CrosstalkError, OSError) as exc:
                self.read_errors.append(f"{peer.name} ack: {exc}")
                return len(fresh)
            self.acked.update(m["id"] for m in messages)
        return len(fresh)

    def _show(self, peer: Peer, messages: list[dict[str, Any]]) -> None:
        """What the reader puts in front of its agent: a second sighting is a duplicate."""
        for message in messages:
            key = message["id"]
            addressee = self.sent.get(key) or self.attempted.get(message["text"])
            if addressee is not None and addressee != peer.name:
                # The sender reading its own message back (see test_echo.py): not a delivery.
                self.echoed += 1
                self.oddities.append({"reader": peer.name, "id": key, "text": message["text"]})
                continue
            self.seen[key] += 1
            if self.seen[key] > 1:
                self.oddities.append({"reader": peer.name, "id": key, "text": message["text"]})
        return len(messages)

    def missing(self, peer: Peer) -> set[str]:
        return {i for i, to in self.sent.items() if to == peer.name and i not in self.seen}

    def wait_delivered(self, *peers: Peer, timeout: float) -> None:
        """Read at every peer until each answered send has arrived; bounded."""

        def complete() -> bool:
            for peer in peers:
                if self.missing(peer):
                    self.read(peer)
            return not any(self.missing(peer) for peer in peers)

        try:
            wait_until(complete, timeout=timeout, what=f"{self.name}: every answered send")
        except (AssertionError, CrosstalkError) as exc:
            logs = "\n".join(f"--- {p.name} daemon.log\n{p.log_tail(25)}" for p in peers)
            raise AssertionError(f"{exc}\n{self.figures()}\n{logs}") from exc

    @property
    def delivered(self) -> int:
        return len(self.seen)

    @property
    def lost(self) -> int:
        return sum(1 for i in self.sent if i not in self.seen)

    @property
    def duplicated(self) -> int:
        return sum(count - 1 for count in self.seen.values() if count > 1)

    def record_restarts(self, *peers: Peer) -> None:
        """Each peer's restarts, asked of every peer at once (a ``doctor`` run takes a second)."""
        with ThreadPoolExecutor(max_workers=len(peers)) as pool:
            counts = list(pool.map(lambda peer: peer.restarts(), peers))
        for peer, count in zip(peers, counts, strict=True):
            self.restarts[peer.name] = count

    def figures(self) -> dict[str, Any]:
        return {
            "scenario": self.name,
            "sent": len(self.sent),
            "states": dict(self.states),
            "unanswered": self.unanswered,
            "refusals": dict(self.refusals),
            **({"refusal_messages": self.refusal_messages} if self.refusal_messages else {}),
            "delivered": self.delivered,
            "lost": self.lost,
            "duplicated_at_agent": self.duplicated,
            "redelivered_unacked": self.redelivered,
            "echoed_to_sender": self.echoed,
            "restarts": self.restarts,
            **({"oddities": self.oddities} if self.oddities else {}),
            **({"read_errors": self.read_errors} if self.read_errors else {}),
            **self.notes,
        }

    def assert_clean(self) -> None:
        """The two promises every scenario checks."""
        assert self.lost == 0, self.figures()
        assert self.duplicated == 0, self.figures()


def drain_reads(tally: Tally, *peers: Peer, rounds: int = 2) -> None:
    """A few more reads after delivery completed, so a late duplicate would be counted."""
    for _ in range(rounds):
        for peer in peers:
            tally.read(peer)


class ProxyProcess:
    """The fault-injecting proxy (``proxy.py``) as a subprocess, driven over its control socket.

    A copy of the helper in tests/e2e/test_relay_link_e2e.py with ``target`` and a bounded stop.
    """

    def __init__(self, target_port: int, control_path: Path, *, lifetime: float = 600) -> None:
        self.control = control_path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.resilience.proxy", "--listen", "127.0.0.1:0",
             "--target", f"127.0.0.1:{target_port}", "--control", str(control_path),
             "--lifetime", str(lifetime)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        info = read_json_line(self.proc, timeout=30)
        self.port = int(str(info["listening"]).rsplit(":", 1)[1])
        self.url = f"ws://127.0.0.1:{self.port}"

    def command(self, line: str) -> dict[str, Any]:
        """One control line; returns the proxy's stats after it."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(10)
            sock.connect(str(self.control))
            sock.sendall(line.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        reply: dict[str, Any] = json.loads(data)
        assert reply["ok"] is True, reply
        stats: dict[str, Any] = reply["stats"]
        return stats

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()


def link_connected(peer: Peer) -> bool:
    """Whether the daemon's relay link is READY (``status`` op)."""
    try:
        return bool(peer.call("status", {})["relay"]["connected"])
    except (CrosstalkError, OSError, KeyError):
        return False

