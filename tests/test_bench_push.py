"""bench/push.py through bench/latency.py at smoke size: no timing is asserted (the machine is
shared); the push figures must exist beside send → held and reach the page's side-by-side table.
The checks that tie an arrival to its message are shown to refuse what is not theirs."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from bench.push import Arrivals, InboxListener, _inbox_line_from, _notification_of

ROOT = Path(__file__).resolve().parents[1]


def test_a_notification_for_another_message_is_not_taken_for_ours() -> None:
    """Only a channel notification whose ids name the message times it."""
    line = json.dumps({"jsonrpc": "2.0", "method": "notifications/claude/channel",
                       "params": {"content": "x", "meta": {"sender": "ana", "ids": "m1,m2"}}})
    assert _notification_of(line, "m2")
    assert not _notification_of(line, "m3")
    assert not _notification_of(json.dumps({"jsonrpc": "2.0", "id": 2, "result": {}}), "m2")


def test_an_inbox_line_for_another_socket_or_sender_is_not_taken() -> None:
    """Only a user message from the session's own socket that names the sender counts."""
    path = Path("/tmp/s.sock")

    def line(source: str, content: str) -> str:
        return json.dumps({"msgV": 1, "type": "user", "from": source,
                           "message": {"role": "user", "content": content}})

    assert _inbox_line_from(line("uds:/tmp/s.sock", "a notice from ana"), path, "ana")
    assert not _inbox_line_from(line("uds:/tmp/other.sock", "from ana"), path, "ana")
    assert not _inbox_line_from(line("uds:/tmp/s.sock", "from ben"), path, "ana")


def test_the_listener_stamps_each_line_a_client_writes_and_skips_unwanted(tmp_path: Path) -> None:
    """Two connections, one line each, as the daemon pushes: both arrive, stamped in order,
    and a wait for the second drops the first."""
    path = tmp_path / "in.sock"
    with InboxListener(path) as listener:
        for text in (b'{"n": 1}\n', b'{"n": 2}\n'):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.connect(str(path))
                client.sendall(text)
        at, line = listener.arrivals.wait_for(lambda s: json.loads(s)["n"] == 2, "line 2",
                                              timeout=10)
    assert json.loads(line) == {"n": 2} and at > 0
    assert not path.exists()


def test_a_line_that_came_before_the_send_is_not_its_push() -> None:
    """A wanted line stamped before ``after`` is dropped: a leftover push cannot time a send."""
    arrivals = Arrivals()
    arrivals.put("ours")
    sent_at = time.time() + 1.0  # the send comes after the leftover line
    with pytest.raises(TimeoutError):
        arrivals.wait_for(lambda s: s == "ours", "inbox line", after=sent_at, timeout=0.0)
    arrivals.put("ours")
    assert arrivals.wait_for(lambda s: s == "ours", "inbox line", timeout=0.0)[1] == "ours"


def test_a_wait_with_nothing_wanted_ends_at_its_bound() -> None:
    """No matching line: a TimeoutError naming what was awaited, never a hang."""
    arrivals = Arrivals()
    arrivals.put("other")
    with pytest.raises(TimeoutError, match="channel notification"):
        arrivals.wait_for(lambda s: s == "ours", "channel notification", timeout=0.0)


# The smoke run of the pushes, beside send → held, is tests/test_bench_smoke.py's (the latency
# section of `python -m bench --quick`): one run of the daemons for both.
