"""Qwen Code 0.15.10 as ana's agent in a room with ben, driven by the stand-in's Chat Completions.

``crosstalk install qwen`` writes the hooks and the trusted MCP server
into ``~/.qwen/settings.json``.
A session is started with ``-p --session-id ID`` and continued with ``-p --resume ID``. Qwen Code
does not run SessionStart in ``-p`` mode (platform-notes §5.3), so the working set comes with
the first prompt's UserPromptSubmit hook, which is still in the session's first model request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    QWEN,
    Driver,
    check_notice_then_read,
    check_send,
    check_task_claim,
    check_working_set,
    new_session_id,
)
from tests.e2e.conftest import Person


class QwenDriver(Driver):
    """``qwen -p`` against the stand-in."""

    def _run(self, prompt: str, *session: str) -> None:
        proc = self.checked(self.agent.run(["-p", prompt, *session, "--output-format", "json"]))
        assert "STANDIN" in proc.stdout or proc.stdout.strip(), self.agent.debug()

    def start(self, prompt: str) -> str:
        session = new_session_id()
        self._run(prompt, "--session-id", session)
        return session

    def resume(self, session: str, prompt: str) -> None:
        self._run(prompt, "--resume", session)


Room = tuple[Person, Person]


def test_a_room_fact_reaches_a_new_sessions_first_model_request(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """The working set (a fact ben added) is in the first request of a new Qwen Code session."""
    check_working_set(QwenDriver, QWEN, room, short_tmp, standin_factory)


def test_the_models_crosstalk_send_reaches_the_other_person(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """A scripted crosstalk_send call arrives at ben's with its words."""
    check_send(QwenDriver, QWEN, room, short_tmp, standin_factory)


def test_a_message_is_announced_without_its_words_and_read_with_them(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ben's message: a notice naming ben on the next hook event, words only via crosstalk_read."""
    check_notice_then_read(QwenDriver, QWEN, room, short_tmp, standin_factory)


def test_a_task_claimed_through_the_mcp_tool_is_claimed_at_the_other_side(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """crosstalk_task_claim from the model: ben's replica shows the task claimed by ana."""
    check_task_claim(QwenDriver, QWEN, room, short_tmp, standin_factory)


