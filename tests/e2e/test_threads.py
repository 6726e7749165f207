"""Threads end to end (issue 19 item 8): real daemons, a real relay, the CLI on both sides.

A reply joins the thread of what it replies to; ``crosstalk thread`` shows both sides in order;
an unknown ``--reply-to`` is ``unknown_message``; closing records the summary and tells the
other participant, whose ``thread`` then shows it closed.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.conftest import Person, pair, wait_for_messages, wait_until


def test_a_thread_shows_in_order_and_closing_it_tells_the_participants(
    people: list[Person],
) -> None:
    """ana asks in thread deploy-42, ben replies by id; both see the thread; ana closes it."""
    ana, ben, _ = people
    pair(ana, ben)
    error = ana.json("send", "ben", "hello", "--reply-to", "0123456789abcdef", expect=1)["error"]
    assert error["code"] == "unknown_message"
    first = ana.json("send", "ben", "can we roll back?", "--thread", "deploy-42")
    (got,) = wait_for_messages(ben, 1)
    assert got["thread"] == "deploy-42"
    reply = ben.json("send", "ana", "yes, rolling back now", "--reply-to", got["id"][:8])
    (answer,) = wait_for_messages(ana, 1)
    assert answer["reply_to"] == first["id"] and answer["thread"] == "deploy-42"
    human = ana.run("read", "--all").stdout
    assert f"reply to {first['id'][:8]}" in human and "thread deploy-42" in human
    shown = ana.json("thread", "deploy-42")
    assert [(m["from"], m["text"]) for m in shown["messages"]] == [
        ("me", "can we roll back?"), ("ben", "yes, rolling back now"),
    ]
    assert shown["closed"] is False and shown["summary"] is None
    assert ben.json("thread", reply["id"][:8])["thread"] == "deploy-42"  # by a message's id
    closed = ana.json("thread", "close", "deploy-42", "--summary", "rolled back to v41")
    assert closed["closed"] is True and closed["summary"] == "rolled back to v41"
    seen: list[dict[str, Any]] = []

    def told() -> bool:
        seen[:] = [ben.json("thread", "deploy-42")]
        return bool(seen[0]["closed"])

    wait_until(told, timeout=30, what="the closing summary at ben's")
    assert seen[0]["summary"] == "rolled back to v41" and seen[0]["closed_by"] == "ana"
    assert [m["text"] for m in seen[0]["messages"]] == [
        "can we roll back?", "yes, rolling back now", "rolled back to v41",
    ]
    assert any(m["text"] == "rolled back to v41" for m in ben.json("read")["messages"])
