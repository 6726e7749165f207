"""Nothing lost at the reader (issue 19), end to end with real daemons and a real relay.

Reading is at least once: ``read`` hands messages out under a lease and only ``ack`` marks them
read. A client that hangs up, or a daemon killed between the reply and the ack, loses nothing.
Posts and ``me/SESSION`` messages surface like a peer's. ``answer`` checks its id. Limits say
``too_large`` before anything is sent.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

from crosstalk.errors import CrosstalkError
from crosstalk.hook import control
from tests.e2e.conftest import (
    Person,
    pair,
    pid_alive,
    read_json_line,
    wait_for_messages,
    wait_until,
    work_in,
)
from tests.e2e.test_attention import notice, op, send, session
from tests.e2e.test_sessions import run_hook


def _op(person: Person, name: str, **params: Any) -> dict[str, Any]:
    return control.request(person.home / "daemon.sock", name, params, timeout=30)


def _five_waiting(ana: Person, ben: Person) -> set[str]:
    """ana sends ben five messages; returns their ids once all five wait unread at ben's."""
    ids = {_op(ana, "send", to="ben", text=f"message {n}")["id"] for n in range(5)}
    wait_until(
        lambda: {m["id"] for m in _op(ben, "read")["messages"]} == ids,
        timeout=30,
        what="five messages waiting at ben's",
    )
    return ids


def _hang_up_after(path: Path, line: bytes, *, take_reply: bool) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(line)
        if take_reply:
            assert b'"lease"' in sock.recv(65536)  # the reply came; no ack follows


def test_a_read_whose_client_hangs_up_before_acknowledging_loses_nothing(
    people: list[Person],
) -> None:
    """A client that closes at once, and one that takes the reply and never acks: all 5 stay."""
    ana, ben, _ = people
    pair(ana, ben)
    ids = _five_waiting(ana, ben)
    request = json.dumps({"v": 1, "op": "read"}).encode() + b"\n"
    _hang_up_after(ben.home / "daemon.sock", request, take_reply=False)
    _hang_up_after(ben.home / "daemon.sock", request, take_reply=True)
    shown = ben.json("read")["messages"]  # the CLI prints, then acknowledges
    assert {m["id"] for m in shown} == ids
    assert ben.json("read")["messages"] == []
    assert len(ben.json("read", "--all")["messages"]) == 5

    def all_read() -> bool:
        states = {r["id"]: r["state"] for r in ana.json("sent")["sent"]}
        return all(states.get(i) == "read" for i in ids)

    wait_until(all_read, timeout=30, what="read receipts for the five, only after the ack")


def test_a_daemon_killed_between_the_read_reply_and_the_ack_loses_nothing(
    people: list[Person],
) -> None:
    """kill -9 after the read answered: the restarted daemon hands out the same ids again."""
    ana, ben, _ = people
    pair(ana, ben)
    ids = _five_waiting(ana, ben)
    first = _op(ben, "read")
    assert {m["id"] for m in first["messages"]} == ids and first["lease"]
    pid = ben.daemon_pid()
    assert pid
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not pid_alive(pid), timeout=10, what="ben's daemon to die")
    ben.json("daemon", "start")
    again = _op(ben, "read")
    assert {m["id"] for m in again["messages"]} == ids
    try:
        _op(ben, "ack", lease=first["lease"])
        raise AssertionError("a lease from before the restart was accepted")
    except CrosstalkError as exc:
        assert exc.code == "unknown_message"
    assert _op(ben, "ack", lease=again["lease"]) == {"ok": True, "acked": 5}
    assert _op(ben, "read")["messages"] == []


def test_acknowledging_by_id_marks_only_those_and_a_short_id_works(people: list[Person]) -> None:
    """``ack {"ids"}`` takes full or short ids; the rest stay unread."""
    ana, ben, _ = people
    pair(ana, ben)
    ids = sorted(_five_waiting(ana, ben))
    assert _op(ben, "ack", ids=[ids[0], ids[1][:8]])["acked"] == 2
    assert {m["id"] for m in _op(ben, "read")["messages"]} == set(ids[2:])


def test_a_post_reaches_a_registered_sessions_hook_at_once(
    people: list[Person], short_tmp: Path
) -> None:
    """A blocking post surfaces at the session's next hook event, with no daemon restart."""
    ana, ben, _ = people
    pair(ana, ben)  # the hook talks to the daemon only for a home that is set up
    base = {"session_id": "s-posted", "cwd": str(short_tmp), "transcript_path": None}
    run_hook(ana, "codex", "SessionStart", base)
    pid = ana.daemon_pid()
    ana.json("post", "deploy failed on staging", "--intent", "blocking", "--source", "ci")
    shown: list[str] = []

    def surfaced() -> bool:
        shown.append(run_hook(ana, "codex", "PostToolUse", base))
        return "deploy failed on staging" in shown[-1]

    wait_until(surfaced, timeout=10, what="the post at the session's hook")
    assert ana.daemon_pid() == pid  # the same daemon: no restart was needed


def test_a_message_to_my_own_session_shows_in_watch_at_once(people: list[Person]) -> None:
    """``send me/SESSION`` and ``post`` are arrivals: ``watch`` prints them as they land."""
    ana, ben, _ = people
    pair(ana, ben)
    watching = ana.spawn("watch", "--text", "--json")
    lines: list[dict[str, Any]] = []

    def listening() -> bool:  # watch subscribes once connected: post until it prints one
        _op(ana, "post", text="warming up", source="test")
        try:
            lines.append(read_json_line(watching, timeout=1))
        except AssertionError:
            return False
        return True

    def next_with(text: str) -> dict[str, Any]:
        while True:
            line = read_json_line(watching, timeout=10)
            if line["text"] == text:
                return line

    try:
        wait_until(listening, timeout=30, what="watch to print a post")
        # as `read --json` gives it: a post crossed no room
        assert lines[0]["from"] == "post:test" and lines[0]["room"] == ""
        op(ana, "session_register", name="review", client="codex", project="/tmp/x")
        ana.json("send", "me/review", "look at the diff later")
        line = next_with("look at the diff later")
        assert line["from"] == "me" and line["event"] == "arrival"
        ana.json("post", "tests are green", "--source", "ci")
        assert next_with("tests are green")["from"] == "post:ci"
    finally:
        watching.kill()
        watching.wait(timeout=10)
        for stream in (watching.stdout, watching.stderr):
            if stream:
                stream.close()


def test_answer_checks_its_id_and_takes_the_short_id_read_shows(people: list[Person]) -> None:
    """A made-up id is unknown_message; the short id from human `read` answers the ask."""
    ana, ben, _ = people
    pair(ana, ben)
    made_up = ana.json("answer", "ben", "0123456789abcdef", "yes", expect=1)["error"]
    assert made_up["code"] == "unknown_message"
    asking = ben.spawn("ask", "ana", "which port?", "--timeout", "60", "--json")
    try:
        wait_until(
            lambda: "which port?" in ana.run("read").stdout, timeout=30, what="the ask at ana's"
        )
        (question,) = ana.json("read", "--all")["messages"]
        human = ana.run("read", "--all").stdout
        short = question["id"][:8]
        assert f"[{short}]" in human and question["id"] not in human
        not_an_ask = _op(ana, "post", text="fyi", source="ci")["id"]
        wrong = ana.json("answer", "ben", not_an_ask, "no", expect=1)["error"]
        assert wrong["code"] == "unknown_message"
        ana.json("answer", "ben", short, "8787")
        answer = read_json_line(asking, timeout=60)
        assert answer["answer"] == "8787" and answer["from"] == "ana"
    finally:
        asking.wait(timeout=30)
        for stream in (asking.stdout, asking.stderr):
            if stream:
                stream.close()


def test_ten_megabytes_is_too_large_before_anything_is_sent(people: list[Person]) -> None:
    """Over the control socket's limit and over a message's limit: too_large, nothing queued."""
    ana, ben, _ = people
    pair(ana, ben)
    huge = "x" * (10 * 1024 * 1024)  # as an MCP client could pass to crosstalk_send
    try:
        _op(ana, "send", to="ben", text=huge)
        raise AssertionError("a 10 MB request was sent")
    except CrosstalkError as exc:
        assert exc.code == "too_large"
    over_text = "y" * 100_000  # over a message's 64 Ki characters, under argv's 128 KiB
    error = ana.json("send", "ben", over_text, expect=1)["error"]
    assert error["code"] == "too_large"
    assert ana.json("sent")["sent"] == []


def test_a_notice_about_a_message_already_read_does_not_surface_again(
    people: list[Person],
) -> None:
    """An fyi held for a busy session and then read through the CLI never surfaces at idle, and
    a blocking one already surfaced is no longer pending for the hook once read."""
    ana, ben, _ = people
    pair(ana, ben)
    session(ana, "s1", "busy")
    fyi = notice(ana, send(ben, "ana", "fyi: renamed the config key"))
    blocking = notice(ana, send(ben, "ana", "prod is down", "--intent", "blocking"))
    assert fyi["surfaced_at"] is None and blocking["surfaced_at"] is not None
    assert {m["id"] for m in ana.json("read")["messages"]} == {fyi["id"], blocking["id"]}
    assert op(ana, "session_status", name="s1", status="idle")["surfaced"] == []
    assert op(ana, "notices", session="s1", pending=True)["notices"] == []


def test_a_slice_cut_to_its_cap_is_reported_to_the_sender_and_marked_at_the_receiver(
    people: list[Person], short_tmp: Path
) -> None:
    """A 300 KiB file slice: send says truncated [0]; the reader sees the slice marked cut."""
    ana, ben, _ = people
    pair(ana, ben)
    project = short_tmp / "project"
    project.mkdir()
    (project / "big.log").write_text("line of log\n" * 25_000)
    work_in(ana, project)
    proc = ana.run("send", "ben", "see the log", "--slice", "file:big.log", "--json", cwd=project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = json.loads(proc.stdout.splitlines()[-1])
    assert sent["truncated"] == [0]
    (message,) = wait_for_messages(ben, 1)
    assert message["slices"][0]["truncated"] is True
    assert "cut to the cap" in ben.run("read", "--all").stdout
