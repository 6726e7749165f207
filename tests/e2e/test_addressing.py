"""Session addresses end to end (issue 39, Build 2): a real relay, real daemons, the CLI.

``send ben/SESSION`` names a session ben published, or is refused with ``unknown_session``
listing his; ``send me/SESSION`` the same for our own sessions. A refused send queues nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Person, pair, wait_until
from tests.e2e.test_attention import notice, op

pytestmark = pytest.mark.e2e


def _published(person: Person, label: str) -> list[str]:
    peers = person.json("peers")["peers"]
    return [s["name"] for p in peers if p["label"] == label for s in p["sessions"]]


def test_a_session_ben_never_published_is_refused_and_his_own_arrives(
    people: list[Person],
) -> None:
    """ben has a live session s1: `send ben/s2` exits 1 with unknown_session naming s1 and
    queues nothing; `send ben/s1` arrives for s1."""
    ana, ben, _ = people
    pair(ana, ben)
    ben.json("daemon", "start")
    op(ben, "session_register", name="s1", client="codex", project="/tmp/billing-api")
    wait_until(lambda: "s1" in _published(ana, "ben"), timeout=30, what="s1 in ana's peers")
    before = len(ana.json("sent")["sent"])

    error: dict[str, Any] = ana.json("send", "ben/s2", "lost in the post", expect=1)["error"]
    assert error["code"] == "unknown_session", error
    assert "'s2'" in error["message"] and "s1 (in billing-api)" in error["message"], error
    assert len(ana.json("sent")["sent"]) == before  # nothing was queued

    sent = ana.json("send", "ben/s1", "the invoice job is stuck", "--intent", "question")
    assert sent["to"] == ["ben/s1"] and sent["state"] in ("sent", "delivered"), sent
    assert notice(ben, sent["id"])["session"] == "s1"


def test_my_own_unknown_session_is_refused_and_a_live_one_delivered(
    people: list[Person],
) -> None:
    """`send me/unknown` exits 1 with unknown_session naming our live session; `send me/mine`
    is delivered to it."""
    ana, ben, _ = people
    pair(ana, ben)
    op(ana, "session_register", name="mine", client="codex", project="/tmp/api")
    error = ana.json("send", "me/unknown", "note to self", expect=1)["error"]
    assert error["code"] == "unknown_session" and "mine" in error["message"], error
    assert all(m["text"] != "note to self" for m in ana.json("read", "--all")["messages"])
    sent = ana.json("send", "me/mine", "note to self")
    assert sent["state"] == "delivered", sent
    assert notice(ana, sent["id"])["session"] == "mine"
