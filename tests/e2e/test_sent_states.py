"""What the sender sees of each message, end to end (issue 39 item 1): real daemons, a real
relay, the CLI. A handoff ben's trust settings refuse reads ``refused`` in ana's ``sent``, with
who and why, and the refusal reaches her as its own kind; a message ben reads reads ``read``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.conftest import Person, pair, wait_for_messages, wait_until

pytestmark = pytest.mark.e2e


def _state_of(person: Person, msg_id: str) -> dict[str, Any]:
    rows = person.json("sent")["messages"]
    (row,) = [r for r in rows if r["id"] == msg_id]
    return dict(row)


def _reaches(person: Person, msg_id: str, state: str) -> dict[str, Any]:
    """Wait (bounded) until ``sent`` shows ``msg_id`` in ``state``; its row."""
    seen: list[dict[str, Any]] = []

    def there() -> bool:
        seen.append(_state_of(person, msg_id))
        return seen[-1]["state"] == state

    wait_until(there, timeout=30, what=f"{msg_id[:8]} {state} (last: {seen[-1:]})")
    return seen[-1]


def test_a_refused_handoff_reads_refused_and_a_read_message_reads_read(
    people: list[Person],
) -> None:
    """ben's default level (ask) refuses handoffs: ana's ``sent`` says refused, by ben, why;
    the refusal is in her inbox as kind ``refusal``, not a question. A message he reads: read."""
    ana, ben, _ = people
    pair(ana, ben)
    handoff = ana.json("send", "ben", "take over the migration", "--handoff")
    row = _reaches(ana, handoff["id"], "refused")
    assert row["by"] == "ben"
    assert "ben" in row["reason"] and "handoff" in row["reason"]
    (notice,) = wait_for_messages(ana, 1)
    assert notice["kind"] == "refusal" and notice["intent"] != "question"
    assert notice["reply_to"] == handoff["id"]

    message = ana.json("send", "ben", "the build is green")
    _reaches(ana, message["id"], "delivered")
    (got,) = wait_for_messages(ben, 1)
    assert got["id"] == message["id"]
    done = _reaches(ana, message["id"], "read")
    assert done.get("reason") is None
    assert _state_of(ana, handoff["id"])["state"] == "refused"  # nothing moved it back
    human = ana.run("sent")
    assert "take over the migration" in human.stdout and "refused" in human.stdout


def test_sent_pages_through_everything_with_next(people: list[Person]) -> None:
    """``--limit 1`` shows the newest and a ``next``; ``--before next`` the one before it, and
    no ``next`` at the end; ``--since`` keeps what is recent; a bad cursor is unknown_message."""
    ana, ben, _ = people
    pair(ana, ben)
    first = ana.json("send", "ben", "one")["id"]
    second = ana.json("send", "ben", "two")["id"]
    page = ana.json("sent", "--limit", "1")
    assert [r["id"] for r in page["messages"]] == [second] and page["next"] == second
    assert page["messages"][0]["text"] == "two"
    rest = ana.json("sent", "--limit", "1", "--before", page["next"])
    assert [r["id"] for r in rest["messages"]] == [first] and rest["next"] is None
    assert {r["id"] for r in ana.json("sent", "--since", "1h")["messages"]} == {first, second}
    hint = ana.run("sent", "--limit", "1").stdout
    assert f"crosstalk sent --before {second}" in hint
    error = ana.json("sent", "--before", "nosuch", expect=1)["error"]
    assert error["code"] == "unknown_message"
    assert ana.run("sent", "--since", "soon").returncode == 2
