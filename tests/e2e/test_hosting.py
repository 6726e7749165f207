"""`room new --host` and `--public`: pairing through a relay this machine runs for others."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from tests.e2e.conftest import (
    Person,
    daemons_with,
    pair,
    wait_for_messages,
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_host_starts_a_relay_and_the_invite_names_it(short_tmp: Path) -> None:
    """--host runs a relay at this machine's address and the joiner finds it from the code."""
    port = _free_port()
    env = {
        "CROSSTALK_HOST_ADDRESS": "127.0.0.1",  # the test machine's only reachable address
        "CROSSTALK_HOST_PORT": str(port),
        "XDG_DATA_HOME": str(short_tmp / "xdg"),
    }
    ana, ben = Person(short_tmp / "ana", ""), Person(short_tmp / "ben", "")
    pid_file = short_tmp / "xdg" / "crosstalk" / f"relay-{port}" / "relay.pid"
    with daemons_with(env, [ana, ben], pid_file):
        inviter, joiner = pair(ana, ben, host=True)
        assert inviter["them"] == joiner["you"]
        assert ana.json("status")["relay"]["url"] == f"ws://127.0.0.1:{port}"
        assert ben.json("status")["relay"]["url"] == f"ws://127.0.0.1:{port}"
        ana.json("send", "ben", "over the hosted relay")
        assert [m["text"] for m in wait_for_messages(ben, 1)] == ["over the hosted relay"]


def test_public_without_cloudflared_says_so_and_changes_nothing(people: list[Person]) -> None:
    """--public with no cloudflared on PATH: one plain sentence, exit 1, no invite made."""
    ana, _, _ = people
    proc = ana.run("room", "new", "--public", "--json", env={"PATH": os.defpath})
    assert proc.returncode == 1
    error = proc.stdout.strip().splitlines()[-1]
    assert '"code": "unavailable"' in error and "cloudflared" in error
    assert not (ana.home / "identity.json").exists()
