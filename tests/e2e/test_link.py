"""`crosstalk link`: a second machine becomes the same identity and gets what is sent to it."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Person, pair, read_json_line, reap, stop_pid, wait_for_messages


def test_linked_machine_and_first_machine_both_receive(
    people: list[Person], short_tmp: Path
) -> None:
    """After linking, a message to the identity reaches both of its machines."""
    ana, ben, _ = people
    pair(ana, ben)
    laptop = Person(short_tmp / "ana-laptop", ana.relay)
    new = ana.spawn("link", "--json")
    try:
        code = read_json_line(new, timeout=60)["invite"]
        assert len(code.split("-")) == 7  # slot + six words
        linked = laptop.json("link", code)
        done = read_json_line(new, timeout=60)
        assert linked["fingerprint"] == done["fingerprint"] == ana.json("status")["fingerprint"]
        assert linked["label"] == "ana"

        ben.json("send", "ana", "to both of ana's machines")
        for machine in (ana, laptop):
            got = wait_for_messages(machine, 1)
            assert [m["text"] for m in got] == ["to both of ana's machines"]
            assert got[0]["from"] == "ben"
        again = laptop.json("link", code, expect=1)["error"]
        assert again["code"] == "already_set_up"
    finally:
        reap(new)
        pid = laptop.daemon_pid()
        if pid:
            stop_pid(pid)
