"""With no relay configured, daemons start and share a local relay on loopback."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import (
    Person,
    daemons_with,
    pair,
    read_json_line,
    wait_for_messages,
)
from tests.e2e.test_hosting import _free_port


def test_local_relay_is_started_once_and_shared(short_tmp: Path) -> None:
    """Two homes with no relay set pair on one local relay that the first daemon started."""
    port = _free_port()
    env = {"CROSSTALK_LOCAL_PORT": str(port), "XDG_DATA_HOME": str(short_tmp / "xdg")}
    ana, ben = Person(short_tmp / "ana", ""), Person(short_tmp / "ben", "")
    pid_file = short_tmp / "xdg" / "crosstalk" / "relay" / "relay.pid"
    with daemons_with(env, [ana, ben], pid_file):
        new = ana.spawn("room", "new", "--json", "--label", "ana")
        first = read_json_line(new, timeout=60)
        assert "only this machine can join" in first["note"]
        new.kill()
        new.wait(timeout=10)
        for stream in (new.stdout, new.stderr):
            if stream:
                stream.close()
        relay_pid = int(pid_file.read_text())
        pair(ana, ben)
        assert int(pid_file.read_text()) == relay_pid  # the second daemon reused it
        assert ben.json("status")["relay"]["url"] == f"ws://127.0.0.1:{port}"
        ben.json("send", "ana", "via the local relay")
        assert wait_for_messages(ana, 1)[0]["text"] == "via the local relay"


def test_a_label_clash_never_replaces_another_key(people: list[Person]) -> None:
    """Two different people both called "sam" become "sam" and "sam-<machine>" (or "sam-2")."""
    ana, ben, cy = people
    ben_pair = ana.spawn("room", "new", "--json", "--label", "ana")
    code = read_json_line(ben_pair, timeout=60)["invite"]
    ben.json("room", "join", code, "--label", "sam", "--agent")
    read_json_line(ben_pair, timeout=60)
    ben_pair.wait(timeout=30)
    for stream in (ben_pair.stdout, ben_pair.stderr):
        if stream:
            stream.close()
    cy_pair = ana.spawn("room", "new", "--json")
    code = read_json_line(cy_pair, timeout=60)["invite"]
    joined = cy.json("room", "join", code, "--label", "sam")
    second = read_json_line(cy_pair, timeout=60)
    cy_pair.wait(timeout=30)
    for stream in (cy_pair.stdout, cy_pair.stderr):
        if stream:
            stream.close()
    assert joined["joined"] == "ana"
    assert second["joined"] != "sam" and second["joined"].startswith("sam-")
    ana.json("send", "sam", "to the first sam")
    ana.json("send", second["joined"], "to the second sam")
    assert [m["text"] for m in wait_for_messages(ben, 1)] == ["to the first sam"]
    assert [m["text"] for m in wait_for_messages(cy, 1)] == ["to the second sam"]
