"""Peer sessions are published to roommates only (issue 19 item 9), end to end: real daemons,
a real relay, the real hook program registering a session, the CLI reading it back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.conftest import Person, pair, wait_until
from tests.e2e.test_attention import notice, op
from tests.e2e.test_sessions import run_hook


def _sessions_of(person: Person, label: str) -> list[dict[str, Any]]:
    peers = person.json("peers")["peers"]
    return next((p["sessions"] for p in peers if p["label"] == label), [])


def test_peers_shows_a_peers_session_by_name_and_sending_to_it_reaches_it(
    people: list[Person], short_tmp: Path
) -> None:
    """ben's hook registers a session; ana's `peers` lists it by name and project, `send
    ben/NAME` lands at that session's next hook event, ben's `status` shows it as his own, and
    the relay's storage never holds the session's name."""
    ana, ben, _ = people
    pair(ana, ben)
    project = short_tmp / "billing-api"
    project.mkdir()
    base = {"session_id": "ben-review-7", "cwd": str(project), "transcript_path": None}
    run_hook(ben, "codex", "SessionStart", base)
    listed: list[dict[str, Any]] = []

    def published() -> bool:
        listed[:] = _sessions_of(ana, "ben")
        return any(s["name"] == "ben-review-7" for s in listed)

    wait_until(published, timeout=30, what="ben's session in ana's peers")
    (seen,) = [s for s in listed if s["name"] == "ben-review-7"]
    assert seen["project"] == "billing-api" and seen["status"] in ("unknown", "busy", "idle")
    assert seen["last_seen"] > 0
    assert "ben/ben-review-7 in billing-api" in ana.run("peers").stdout
    own = ben.json("status")["sessions"]
    assert [s["name"] for s in own] == ["ben-review-7"]
    sent = ana.json("send", "ben/ben-review-7", "the invoice job is stuck", "--intent",
                    "question")
    assert notice(ben, sent["id"])["session"] == "ben-review-7"
    shown: list[str] = []

    def reached() -> bool:
        shown.append(run_hook(ben, "codex", "PostToolUse", base))
        return "ana sent you a message" in shown[-1]

    wait_until(reached, timeout=30, what="the message at ben's session's hook")
    relay_files = [p for p in ana.relay_data.rglob("*") if p.is_file()]
    assert relay_files
    assert not any(b"ben-review-7" in p.read_bytes() for p in relay_files)
    assert not any(b"billing-api" in p.read_bytes() for p in relay_files)


def test_sessions_are_published_only_to_people_who_share_a_room(people: list[Person]) -> None:
    """cy shares a room with ana but not with ben: ana sees ben's session, cy sees ana's
    session but nothing of ben's."""
    ana, ben, cy = people
    pair(ana, ben)
    pair(ana, cy)
    for person, name in ((ana, "ana-main"), (ben, "ben-main")):
        person.json("daemon", "start")
        op(person, "session_register", name=name, client="codex", project="/tmp/x")
    wait_until(lambda: bool(_sessions_of(ana, "ben")), timeout=30, what="ben's session at ana's")
    wait_until(lambda: bool(_sessions_of(cy, "ana")), timeout=30, what="ana's session at cy's")
    assert all(p["label"] != "ben" for p in cy.json("peers")["peers"])
    cy_files = [p for p in cy.home.rglob("*") if p.is_file() and p.suffix != ".sock"]
    assert not any(b"ben-main" in p.read_bytes() for p in cy_files if not p.is_socket())
