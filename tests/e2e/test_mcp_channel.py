"""Claude Code channels by contract: the JSON-RPC a real `crosstalk server` subprocess sends.

With ``CROSSTALK_CHANNELS=1`` the server declares ``experimental["claude/channel"]`` and pushes
what the gate surfaced as ``notifications/claude/channel`` (the sender's words only at
``deliver``), marking it shown; without it, the server and the notices are as before.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from crosstalk.hook.control import request
from tests.e2e.conftest import Person, pair, wait_until

pytestmark = pytest.mark.e2e

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "contract-test", "version": "0"}},
}


class Server:
    """A `crosstalk server` on pipes, read line by line with deadlines."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def next_message(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise AssertionError(f"the server sent nothing within {timeout}s")
        line = self.proc.stdout.readline()
        assert line, "the server closed its stdout"
        message: dict[str, Any] = json.loads(line)
        return message

    def until(self, method: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            message = self.next_message(max(0.01, deadline - time.monotonic()))
            if message.get("method") == method:
                return message

    def initialize(self) -> dict[str, Any]:
        self.send(INIT)
        reply = self.next_message(30)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        result: dict[str, Any] = reply["result"]
        return result


@contextmanager
def mcp_server(person: Person, *, channels: bool) -> Iterator[Server]:
    env = {**os.environ, "CROSSTALK_RELAY": person.relay}
    env.pop("CROSSTALK_HOME", None)
    env.pop("CROSSTALK_CHANNELS", None)
    if channels:
        env["CROSSTALK_CHANNELS"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "server", "--home", str(person.home)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=env,
    )
    try:
        yield Server(proc)
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdout.close()


def pending(person: Person) -> list[dict[str, Any]]:
    """Notices the gate surfaced at ``person`` that no session has shown yet."""
    reply = request(person.home / "daemon.sock", "notices", {"pending": True}, timeout=10)
    return list(reply["notices"])


def test_channel_pushes_a_notice_without_words_below_deliver(people: list[Person]) -> None:
    """At the default level the push says who wrote and how to read it, never their words."""
    ana, ben = people[:2]
    pair(ana, ben)
    with mcp_server(ana, channels=True) as server:
        capabilities = server.initialize()["capabilities"]
        assert capabilities["experimental"] == {"claude/channel": {}}
        sent = ben.json("send", "ana", "the secret plan is X", "--intent", "question")
        push = server.until("notifications/claude/channel", timeout=30)
        # The server marks the notice shown once the push is written (never before: a push that
        # fails must leave it for the hook), so it is shown shortly after the push arrives.
        wait_until(lambda: pending(ana) == [], timeout=30, what="the pushed notice marked shown")
    params = push["params"]
    assert params["meta"]["sender"] == "ben"
    assert sent["id"] in params["meta"]["ids"].split(",")
    assert "ben" in params["content"] and "the secret plan is X" not in params["content"]
    assert all(k.replace("_", "").isalnum() for k in params["meta"])  # identifier keys only


def test_channel_pushes_the_words_at_deliver(people: list[Person]) -> None:
    """A sender raised to ``deliver`` has their words quoted in the push."""
    ana, ben = people[:2]
    pair(ana, ben)
    ana.json("trust", "ben", "deliver")
    with mcp_server(ana, channels=True) as server:
        server.initialize()
        ben.json("send", "ana", "deploy is green", "--intent", "question")
        push = server.until("notifications/claude/channel", timeout=30)
    assert "deploy is green" in push["params"]["content"]


def test_without_channels_the_server_is_unchanged(people: list[Person]) -> None:
    """No capability declared, nothing pushed: the notice stays for the hook to show."""
    ana, ben = people[:2]
    pair(ana, ben)
    with mcp_server(ana, channels=False) as server:
        assert "claude/channel" not in server.initialize()["capabilities"].get("experimental", {})
        sent = ben.json("send", "ana", "hello there", "--intent", "question")
        wait_until(lambda: any(n["id"] == sent["id"] for n in pending(ana)), timeout=30,
                   what="the notice at ana")
        server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        reply = server.next_message(30)
        assert reply.get("id") == 2, reply  # nothing else came first
    assert any(n["id"] == sent["id"] for n in pending(ana))
