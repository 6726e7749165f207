"""Gemini CLI 0.61.0 as ana's agent in a room with ben, driven by the stand-in's Gemini API.

``crosstalk install gemini`` writes the hooks (``SessionStart``, ``BeforeAgent``, ...) and the
trusted MCP server into ``~/.gemini/settings.json``; the test adds only what any Gemini CLI user
sets once, the API-key auth choice, and trusts the folder through
``GEMINI_CLI_TRUST_WORKSPACE`` (a person answers the trust prompt instead: docs/clients.md).
A session is started with ``-p --session-id ID`` and continued with ``-p --resume latest`` (the
agent's HOME is its own, so the latest session of the project is this one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    GEMINI,
    Agent,
    Driver,
    check_notice_then_read,
    check_send,
    check_task_claim,
    check_working_set,
    new_session_id,
)
from tests.e2e.conftest import Person

#: A named model: with the default ("auto") Gemini CLI first asks a routing classifier for JSON,
#: and on the stand-in's text answer retries with backoff for about 100 s (measured on 0.61.0).
MODEL = "gemini-3.1-pro-preview"


def choose_api_key_auth(agent: Agent) -> None:
    """Set ``security.auth.selectedType`` beside what the installer wrote (rc 41 without it)."""
    path = agent.home / ".gemini" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    assert "crosstalk" in settings["mcpServers"] and "BeforeAgent" in settings["hooks"], settings
    settings.setdefault("security", {}).setdefault("auth", {})["selectedType"] = "gemini-api-key"
    path.write_text(json.dumps(settings, indent=2), encoding="utf-8")


class GeminiDriver(Driver):
    """``gemini -p`` against the stand-in."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent)
        choose_api_key_auth(agent)

    def _run(self, prompt: str, *session: str) -> None:
        argv = ["-p", prompt, *session, "-m", MODEL, "--output-format", "json"]
        self.checked(self.agent.run(argv))

    def start(self, prompt: str) -> str:
        session = new_session_id()
        self._run(prompt, "--session-id", session)
        return session

    def resume(self, session: str, prompt: str) -> None:
        self._run(prompt, "--resume", "latest")


Room = tuple[Person, Person]


def test_a_room_fact_reaches_a_new_sessions_first_model_request(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """The working set (a fact ben added) is in the first request of a new Gemini CLI session."""
    check_working_set(GeminiDriver, GEMINI, room, short_tmp, standin_factory)


def test_the_models_crosstalk_send_reaches_the_other_person(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """A scripted crosstalk_send call (mcp_crosstalk_crosstalk_send) arrives at ben's."""
    check_send(GeminiDriver, GEMINI, room, short_tmp, standin_factory)


def test_a_message_is_announced_without_its_words_and_read_with_them(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ben's message: a notice naming ben on the next hook event, words only via crosstalk_read."""
    check_notice_then_read(GeminiDriver, GEMINI, room, short_tmp, standin_factory)


def test_a_task_claimed_through_the_mcp_tool_is_claimed_at_the_other_side(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """crosstalk_task_claim from the model: ben's replica shows the task claimed by ana."""
    check_task_claim(GeminiDriver, GEMINI, room, short_tmp, standin_factory)
