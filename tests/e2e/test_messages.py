"""Messages end to end: ask/answer, delivery states, slices, and a burst from three senders."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

from crosstalk.hook import control
from tests.e2e.conftest import (
    Person,
    pair,
    read_json_line,
    stop_pid,
    wait_for_messages,
    wait_until,
    work_in,
)


def test_ask_is_answered_and_an_unanswered_ask_says_no_answer(people: list[Person]) -> None:
    """An ask returns the answer; with nobody answering it ends in no_answer, leaving nothing."""
    ana, ben, _ = people
    pair(ana, ben)
    asking = ben.spawn("ask", "ana", "what does /api/devices return?", "--timeout", "60", "--json")
    try:
        (question,) = wait_for_messages(ana, 1)
        assert question["kind"] == "ask" and question["from"] == "ben"
        ana.json("answer", "ben", question["correlation"], "a list of devices, snake_case")
        answer = read_json_line(asking, timeout=60)
        assert "answer" in answer, (answer, ben.log_tail(40))
        assert answer["answer"] == "a list of devices, snake_case" and answer["from"] == "ana"
    finally:
        asking.wait(timeout=30)
        for stream in (asking.stdout, asking.stderr):
            if stream:
                stream.close()
    error = ben.json("ask", "ana", "anyone there?", "--timeout", "2", expect=1)["error"]
    assert error["code"] == "no_answer"
    assert control.request(ben.home / "daemon.sock", "asks", timeout=10)["waiting"] == []


def test_delivery_states_move_from_queued_to_read(people: list[Person]) -> None:
    """To an offline member: queued or sent, then delivered when it is back, then read."""
    ana, ben, _ = people
    pair(ana, ben)
    ben_pid = ben.daemon_pid()
    assert ben_pid
    stop_pid(ben_pid)
    sent = ana.json("send", "ben", "while you were away")
    assert sent["state"] in {"queued", "sent"}

    def state() -> str:
        return next(r["state"] for r in ana.json("sent")["sent"] if r["id"] == sent["id"])

    ben.json("daemon", "start")
    wait_until(lambda: state() == "delivered", timeout=30, what="a delivered receipt")
    (message,) = wait_for_messages(ben, 1)
    assert message["text"] == "while you were away"
    wait_until(lambda: state() == "read", timeout=30, what="a read receipt")
    assert ben.json("read", "--all")["messages"][0]["id"] == message["id"]


def test_slices_refuse_secrets_and_arrive_intact(people: list[Person], short_tmp: Path) -> None:
    """A credential file and a path outside the project are refused; a slice matches its sha256."""
    ana, ben, _ = people
    pair(ana, ben)
    project = short_tmp / "project"
    project.mkdir()
    (project / ".env").write_text("API_KEY=hunter2\n")
    (project / "notes.md").write_text("uploads chunk at 4KB\n" * 50)
    (short_tmp / "outside.txt").write_text("not in the project")
    work_in(ana, project)

    def send(*args: str, expect: int = 0) -> dict[str, object]:
        proc = ana.run("send", "ben", "see attached", *args, "--json", cwd=project)
        assert proc.returncode == expect, proc.stdout + proc.stderr
        return dict(json.loads(proc.stdout.splitlines()[-1]))

    assert send("--slice", "file:.env", expect=1)["error"]["code"] == "credential_refused"  # type: ignore[index]
    assert send("--slice", "file:../outside.txt", expect=1)["error"]["code"] == "refused"  # type: ignore[index]
    send("--slice", "file:notes.md", "--slice", "note:remember the rename")
    (message,) = wait_for_messages(ben, 1)
    assert [(s["kind"], s["label"]) for s in message["slices"]] == [
        ("file", "notes.md"),
        ("note", "note"),
    ]
    got = ben.json("slice", message["id"], "0")
    content = (project / "notes.md").read_text()
    assert got["content"] == content
    assert got["sha256"] == hashlib.sha256(content.encode()).hexdigest()
    assert "hunter2" not in str(ben.json("read", "--all"))


def test_three_senders_two_hundred_each_arrive_once_in_order(people: list[Person]) -> None:
    """3 senders × 200 messages at once to one recipient: each once, each sender's order kept."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(cy, ben)
    laptop_of = {"ana": ana, "cy": cy}
    sock = {name: p.home / "daemon.sock" for name, p in laptop_of.items()}
    sock["ben"] = ben.home / "daemon.sock"
    errors: list[BaseException] = []

    def burst(name: str, count: int, to: str) -> None:
        try:
            for i in range(count):
                control.request(sock[name], "send", {"to": to, "text": f"{name} {i}"}, timeout=60)
        except BaseException as exc:  # reported below
            errors.append(exc)

    # ben sends to ana too, so three senders run at once (ana receives ben's; ben receives two)
    threads = [
        threading.Thread(target=burst, args=("ana", 200, "ben")),
        threading.Thread(target=burst, args=("cy", 200, "ben")),
        threading.Thread(target=burst, args=("ben", 200, "ana")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not errors and not any(t.is_alive() for t in threads)
    for person, senders in ((ben, ("ana", "cy")), (ana, ("ben",))):
        got = wait_for_messages(person, 200 * len(senders), timeout=120)
        texts = [m["text"] for m in got]
        assert len(texts) == len(set(texts)) == 200 * len(senders)
        for sender in senders:
            mine = [int(t.split()[1]) for t in texts if t.startswith(sender + " ")]
            assert mine == list(range(200)), f"{sender}'s order was not kept"


def test_a_cancelled_ask_leaves_nothing_behind(people: list[Person]) -> None:
    """Killing the asking command cancels the ask: the daemon is waiting on nothing after."""
    ana, ben, _ = people
    pair(ana, ben)
    sock = ben.home / "daemon.sock"
    asking = ben.spawn("ask", "ana", "will you answer?", "--timeout", "120", "--json")
    try:
        wait_until(
            lambda: bool(control.request(sock, "asks", timeout=10)["waiting"]),
            timeout=30,
            what="the ask to be waiting",
        )
    finally:
        asking.kill()
        asking.wait(timeout=10)
        for stream in (asking.stdout, asking.stderr):
            if stream:
                stream.close()
    wait_until(
        lambda: control.request(sock, "asks", timeout=10)["waiting"] == [],
        timeout=30,
        what="the cancelled ask to be gone",
    )


def test_self_initiated_messages_need_a_reason_and_are_rationed(people: list[Person]) -> None:
    """--unprompted needs --because, and a sixth in an hour to one person is refused."""
    ana, ben, _ = people
    pair(ana, ben)
    error = ana.json("send", "ben", "fyi", "--unprompted", expect=1)["error"]
    assert error["code"] == "needs_reason"
    for i in range(5):
        ana.json("send", "ben", f"heads up {i}", "--unprompted", "--because", "it touches your PR")
    error = ana.json("send", "ben", "one more", "--unprompted", "--because", "really", expect=1)
    assert error["error"]["code"] == "ration_spent"
    assert ana.json("send", "ben", "asked for, so not rationed")["to"] == ["ben"]


def test_watch_prints_one_line_per_arrival_and_post_needs_no_relay(people: list[Person]) -> None:
    """`watch --text` prints each arrival as it lands; `post` and `me/S` stay on this machine."""
    ana, ben, _ = people
    pair(ana, ben)
    watching = ana.spawn("watch", "--text", "--json")
    try:
        # watch prints what lands once it is on: the send waits for that, or it may land first
        wait_until(
            lambda: control.request(ana.home / "daemon.sock", "asks", timeout=10)["watching"] > 0,
            timeout=30,
            what="ana's watch to be on",
        )
        ben.json("send", "ana", "watch this", "--intent", "blocking")
        line = read_json_line(watching, timeout=30)
        assert line["event"] == "arrival" and line["from"] == "ben"
        assert line["text"] == "watch this" and line["intent"] == "blocking"
    finally:
        watching.kill()
        watching.wait(timeout=10)
        for stream in (watching.stdout, watching.stderr):
            if stream:
                stream.close()
    assert ana.json("post", "migration finished", "--source", "ci") == {"posted_as": "post:ci"}
    params = {"name": "review", "client": "codex", "project": "/tmp/x"}
    assert control.request(ana.home / "daemon.sock", "session_register", params)["ok"] is True
    assert ana.json("send", "me/review", "look at the diff later")["state"] == "delivered"
    got = {m["text"]: m for m in ana.json("read")["messages"]}
    assert got["migration finished"]["from"] == "post:ci"
    assert "look at the diff later" in got


def test_asking_someone_who_is_waiting_on_you_tells_both(people: list[Person]) -> None:
    """ana waits on ben; ben asks ana: ana's ask hears of it and ben gets a blocking notice."""
    ana, ben, _ = people
    pair(ana, ben)
    asking = ana.spawn("ask", "ben", "ship it?", "--timeout", "60", "--json")
    try:
        wait_until(
            lambda: bool(control.request(ana.home / "daemon.sock", "asks", timeout=10)["waiting"]),
            timeout=30,
            what="ana's ask to be waiting",
        )
        back = ben.spawn("ask", "ana", "did you test it?", "--timeout", "5", "--json")
        notes = [m for m in wait_for_messages(ben, 2) if m["kind"] == "notice"]
        assert notes and "waiting on each other" in notes[0]["text"]
        back.wait(timeout=30)
        for stream in (back.stdout, back.stderr):
            if stream:
                stream.close()
    finally:
        asking.kill()
        asking.wait(timeout=10)
    assert asking.stdout is not None and asking.stderr is not None
    told = asking.stderr.read()
    asking.stdout.close()
    asking.stderr.close()
    assert "waiting on each other" in told


def test_an_ask_below_the_receivers_level_is_refused_automatically(people: list[Person]) -> None:
    """ben trusts ana only to `notify`: her ask comes back `refused` without ben doing anything."""
    ana, ben, _ = people
    pair(ana, ben)
    ben.json("trust", "ana", "notify")
    error = ana.json("ask", "ben", "can you review my PR?", "--timeout", "60", expect=1)["error"]
    assert error["code"] == "refused"
