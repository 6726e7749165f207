"""Notices the hook shows are marked shown only after the answer was written (issue 19 item 3),
and a session start shows one summary per sender however many batches are waiting."""

from __future__ import annotations

import json
import time
from typing import Any

from crosstalk.hook.main import run
from crosstalk.paths import Home
from tests.hook.fake_daemon import FakeDaemon
from tests.hook.test_hook_program import WS, default_replies, home, payload

__all__ = ["home"]  # the fixture, used by name


def _row(nid: str, label: str, batch: str) -> dict[str, Any]:
    return {
        "id": nid, "sender": "fp-" + label, "label": label, "session": None, "room": "r1",
        "from_session": None, "intent": "question", "kind": "message",
        "decision": "notice_now", "due": "now", "created_at": 1.0, "surfaced_at": 1.0,
        "batch": batch,
    }


def _shown(fake: FakeDaemon) -> list[list[str]]:
    return [r["ids"] for r in fake.requests if r["op"] == "notice_shown"]


def _pending_until_shown(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Replies that serve ``rows`` at every ``notices`` until a ``notice_shown`` names them."""
    replies = default_replies()

    def notices(_: dict[str, Any]) -> dict[str, Any]:
        return {"notices": list(rows)}

    def shown(request: dict[str, Any]) -> dict[str, Any]:
        rows[:] = [r for r in rows if r["id"] not in request["ids"]]
        return {"shown": len(request["ids"])}

    return {**replies, "notices": notices, "notice_shown": shown}


def test_an_answer_that_could_not_be_written_leaves_its_notices_pending(home: Home) -> None:
    """When stdout is gone the hook exits 1 and never says notice_shown; the next event that
    is written shows the same notice and only then marks it."""
    rows = [_row("m1", "ben", "b1")]
    fake = FakeDaemon(home.socket, _pending_until_shown(rows))
    try:
        def event() -> tuple[list[str], float, str]:
            return (["--client", "codex", "PostToolUse"], time.monotonic(),
                    payload("codex", "PostToolUse"))

        _, status = run(*event(), emit=lambda text: False)
        assert status == 1
        assert _shown(fake) == [] and [r["id"] for r in rows] == ["m1"]
        written: list[str] = []
        out, status = run(*event(), emit=lambda text: written.append(text) is None)
        assert status == 0 and written == [out] and "ben sent you a message" in out
        assert _shown(fake) == [["m1"]] and rows == []
    finally:
        fake.close()


def test_a_session_start_shows_one_summary_per_sender(home: Home) -> None:
    """Five notices from ben in five batches and one from cy: two notices, one per sender."""
    rows = [_row(f"b{n}", "ben", f"batch-{n}") for n in range(5)] + [_row("c1", "cy", "x")]
    fake = FakeDaemon(home.socket, default_replies(rows))
    try:
        out, _ = run(["--client", "claude", "SessionStart"], time.monotonic(),
                     payload("claude", "SessionStart"))
        text = json.loads(out)["hookSpecificOutput"]["additionalContext"]
        notices = text[len(WS):]
        assert notices.count("<crosstalk-notice ") == 2
        assert "ben sent you 5 messages" in notices and "cy sent you a message" in notices
        assert _shown(fake) == [[f"b{n}" for n in range(5)] + ["c1"]]
    finally:
        fake.close()
