"""Claude Code 2.1.197 (and 2.1.332 with ENABLE_TOOL_SEARCH=false) as ana's agent in a room
with ben, driven by the stand-in model; every check is on the real client and a real relay.

A session is started with ``-p --session-id ID`` and continued with ``-p --resume ID``, so the
second run is the same session's next hook event (Claude Code keeps the id on resume).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import (
    CLAUDE,
    CLAUDE_NEW,
    Driver,
    Pin,
    check_notice_then_read,
    check_send,
    check_task_claim,
    check_working_set,
    new_session_id,
)
from tests.e2e.conftest import Person


class ClaudeDriver(Driver):
    """``claude -p`` with our MCP server's tools allowed (the installer leaves that to the user)."""

    def _run(self, prompt: str, *session: str) -> dict[str, Any]:
        argv = ["-p", prompt, *session, "--allowedTools", "mcp__crosstalk",
                "--output-format", "json"]
        proc = self.checked(self.agent.run(argv))
        result: dict[str, Any] = json.loads(proc.stdout)
        assert result["is_error"] is False, self.agent.debug()
        return result

    def start(self, prompt: str) -> str:
        session = new_session_id()
        assert self._run(prompt, "--session-id", session)["session_id"] == session
        return session

    def resume(self, session: str, prompt: str) -> None:
        assert self._run(prompt, "--resume", session)["session_id"] == session


PINS = [pytest.param(CLAUDE, id="2.1.197"), pytest.param(CLAUDE_NEW, id="2.1.332")]
Room = tuple[Person, Person]


@pytest.mark.parametrize("pin", PINS)
def test_a_room_fact_reaches_a_new_sessions_first_model_request(
    pin: Pin, room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """The working set (a fact ben added) is in the first request of a new Claude session."""
    check_working_set(ClaudeDriver, pin, room, short_tmp, standin_factory)


@pytest.mark.parametrize("pin", PINS)
def test_the_models_crosstalk_send_reaches_the_other_person(
    pin: Pin, room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """A scripted crosstalk_send call from the model arrives at ben's with its words."""
    check_send(ClaudeDriver, pin, room, short_tmp, standin_factory)


@pytest.mark.parametrize("pin", PINS)
def test_a_message_is_announced_without_its_words_and_read_with_them(
    pin: Pin, room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ben's message: a notice naming ben on the next hook event, words only via crosstalk_read."""
    check_notice_then_read(ClaudeDriver, pin, room, short_tmp, standin_factory)


@pytest.mark.parametrize("pin", PINS)
def test_a_task_claimed_through_the_mcp_tool_is_claimed_at_the_other_side(
    pin: Pin, room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """crosstalk_task_claim from the model: ben's replica shows the task claimed by ana."""
    check_task_claim(ClaudeDriver, pin, room, short_tmp, standin_factory)


