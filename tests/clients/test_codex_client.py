"""Codex 0.171.0 as ana's agent in a room with ben, driven by the stand-in's Responses API.

Codex reads its provider from ``-c`` overrides here (the installer writes only the MCP block
and ``hooks.json``), and runs hooks nobody trusted only with ``--dangerously-bypass-hook-trust``:
the trust a person gives once through ``/hooks`` is a human step (docs/clients.md). A session is
started with ``codex exec --json`` (its ``thread.started`` event names the session) and continued
with ``codex exec resume ID``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    CODEX,
    Driver,
    check_notice_then_read,
    check_send,
    check_task_claim,
    check_working_set,
)
from tests.e2e.conftest import Person

PROVIDER = "model_providers.standin={{name=\"Standin\",base_url=\"{url}/v1\"," \
           "env_key=\"STANDIN_API_KEY\",wire_api=\"responses\"}}"


class CodexDriver(Driver):
    """``codex exec`` against the stand-in, hooks run without the trust step."""

    def _flags(self) -> list[str]:
        return [
            "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
            "-m", "standin-model", "-c", "model_provider=standin",
            "-c", PROVIDER.format(url=self.agent.standin.url),
            # Codex starts the first turn before a slow MCP server has listed its tools, unless
            # the server is required (measured: ``crosstalk server`` takes 1-3 s to start).
            "-c", "mcp_servers.crosstalk.required=true",
            # Codex hands MCP servers a minimal environment; without this the server would act
            # for the default ~/.crosstalk identity, not the test's (measured).
            "-c", 'mcp_servers.crosstalk.env_vars=["CROSSTALK_HOME","CROSSTALK_RELAY"]',
        ]

    def _events(self, argv: list[str]) -> list[dict[str, Any]]:
        proc = self.checked(self.agent.run(argv))
        events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert not [e for e in events if e.get("type") in ("error", "turn.failed")], \
            self.agent.debug()
        return events

    def start(self, prompt: str) -> str:
        events = self._events(["exec", *self._flags(), prompt])
        started = [e["thread_id"] for e in events if e.get("type") == "thread.started"]
        assert started, self.agent.debug()
        return str(started[0])

    def resume(self, session: str, prompt: str) -> None:
        self._events(["exec", "resume", *self._flags(), session, prompt])


Room = tuple[Person, Person]


def test_a_room_fact_reaches_a_new_sessions_first_model_request(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """The working set (a fact ben added) is in the first request of a new Codex session."""
    check_working_set(CodexDriver, CODEX, room, short_tmp, standin_factory)


def test_the_models_crosstalk_send_reaches_the_other_person(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """A scripted crosstalk_send call (namespace mcp__crosstalk) arrives at ben's."""
    check_send(CodexDriver, CODEX, room, short_tmp, standin_factory)


def test_a_message_is_announced_without_its_words_and_read_with_them(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ben's message: a notice naming ben on the next hook event, words only via crosstalk_read."""
    check_notice_then_read(CodexDriver, CODEX, room, short_tmp, standin_factory)


def test_a_task_claimed_through_the_mcp_tool_is_claimed_at_the_other_side(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """crosstalk_task_claim from the model: ben's replica shows the task claimed by ana."""
    check_task_claim(CodexDriver, CODEX, room, short_tmp, standin_factory)
