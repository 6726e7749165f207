"""`crosstalk watch` across a daemon restart: every arrival once, and a clear end when the daemon
is gone for good."""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections import Counter
from typing import Any

from crosstalk.hook import control
from tests.e2e.conftest import Person, pair, stop_pid, wait_until

WATCH_FIELDS = ("id", "from", "session", "room", "intent", "kind", "text")


def _watching(person: Person) -> bool:
    try:
        reply = control.request(person.home / "daemon.sock", "asks", timeout=10)
    except Exception:
        return False
    return bool(reply["watching"] > 0)


class _Lines:
    """Reads a process's stdout line by line from its file descriptor, with a deadline (a text
    file's readline would keep the lines after the first in its buffer, out of select's sight)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        self._fd = proc.stdout.fileno()
        self._buffer = b""

    def next(self, timeout: float) -> bytes:
        """The next line (b"" at end of file), within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self._fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    raise AssertionError(f"no line within {timeout}s")
                chunk = os.read(self._fd, 65536)
                if not chunk:
                    return b""
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def until(self, text: str, *, timeout: float) -> list[dict[str, Any]]:
        """Every arrival printed up to and including the one carrying ``text``."""
        lines: list[dict[str, Any]] = []
        while not lines or lines[-1].get("text") != text:
            line = self.next(timeout)
            assert line, "watch ended"
            lines.append(json.loads(line))
        return lines

    def rest(self, timeout: float) -> list[bytes]:
        """The lines left until the end of the output."""
        lines = []
        while line := self.next(timeout):
            lines.append(line)
        return lines


def _stderr_within(watch: subprocess.Popen[str], timeout: float) -> str:
    """What ``watch`` wrote on stderr once it has exited (within ``timeout`` seconds)."""
    watch.wait(timeout=timeout)
    assert watch.stderr is not None
    with selectors.DefaultSelector() as selector:
        selector.register(watch.stderr, selectors.EVENT_READ)
        selector.select(5)
        return watch.stderr.read()


def test_watch_resumes_across_a_daemon_restart_and_ends_loudly_when_it_is_gone(
    people: list[Person],
) -> None:
    """Arrivals before, during and after a restart print once each, with read's fields; a daemon
    that does not come back ends watch with daemon_unreachable and a line on stderr."""
    ana, ben, _ = people
    pair(ana, ben)
    watch = ana.spawn("watch", "--text", "--json", "--reconnect", "8")
    out = _Lines(watch)
    try:
        wait_until(lambda: _watching(ana), timeout=30, what="ana's watch to be on")
        ben.json("send", "ana", "before")
        before = out.until("before", timeout=30)

        pid = ana.daemon_pid()
        assert pid is not None
        stop_pid(pid)
        ben.json("send", "ana", "during")  # held by the relay while ana's daemon is down
        assert ana.json("daemon", "start")["running"] is True
        wait_until(lambda: _watching(ana), timeout=30, what="watch to reconnect")
        ben.json("send", "ana", "after")
        ana.json("post", "last", "--source", "ci")
        rest = out.until("last", timeout=60)

        texts = Counter(line["text"] for line in before + rest)
        assert texts == Counter({"before": 1, "during": 1, "after": 1, "last": 1}), texts
        read = {m["id"]: m for m in ana.json("read", "--all")["messages"]}
        for line in before + rest:
            assert line["event"] == "arrival"
            held = read[line["id"]]
            assert {k: line[k] for k in WATCH_FIELDS} == {k: held[k] for k in WATCH_FIELDS}
        assert read[before[0]["id"]]["room"] != ""  # the room's name, as read gives it

        pid = ana.daemon_pid()
        assert pid is not None
        stop_pid(pid)  # gone for good this time
        err = _stderr_within(watch, timeout=30)
        assert watch.returncode == 1
        assert "daemon" in err and "did not come back" in err, err
        tail = out.rest(timeout=10)
        assert tail and b'"daemon_unreachable"' in tail[-1], tail
    finally:
        if watch.poll() is None:
            watch.kill()
        watch.wait(timeout=10)
        for stream in (watch.stdout, watch.stderr):
            if stream:
                stream.close()
