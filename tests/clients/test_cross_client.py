"""A conversation across clients: ana's Claude Code asks, ben's Codex reads and answers, ana's
Claude Code reads the answer; both models are stand-ins, everything else is real (issue 10 §4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.clients.conftest import (
    CLAUDE,
    CODEX,
    PROPAGATION,
    after,
    agent_for,
    mcp_call,
    pending_notices,
)
from tests.clients.test_claude_client import ClaudeDriver
from tests.clients.test_codex_client import CodexDriver
from tests.e2e.conftest import Person, wait_until

QUESTION = "which port does the staging relay listen on"
ANSWER = "the staging relay listens on port 7447"


def test_claude_code_asks_and_codex_answers_through_the_room(
    room: tuple[Person, Person], short_tmp: Path, standin_factory: Any
) -> None:
    """The question reaches Codex's model through crosstalk_read, and its crosstalk_send answer
    reaches Claude Code's model through crosstalk_read, each announced first by a notice."""
    ana, ben = room
    asker_steps = [
        mcp_call(CLAUDE, "crosstalk_send", {"to": "ben", "text": QUESTION, "intent": "question"},
                 "call_ask", {"user_text_contains": "ask ben"}),
        after("call_ask", "asked"),
        mcp_call(CLAUDE, "crosstalk_read", {}, "call_read_answer",
                 {"user_text_contains": "any answer"}),
        after("call_read_answer", "got it"),
    ]
    answerer_steps = [
        mcp_call(CODEX, "crosstalk_read", {}, "call_read_question",
                 {"user_text_contains": "check messages"}),
        {"when": {"tool_result_for": "call_read_question"},
         "reply": {"tool": "crosstalk_send", "server": "crosstalk", "call_id": "call_answer",
                   "arguments": {"to": "ana", "text": ANSWER, "intent": "question"}},
         "times": 1},
        after("call_answer", "answered"),
    ]
    asker = agent_for(CLAUDE, ana, short_tmp, standin_factory, asker_steps)
    answerer = agent_for(CODEX, ben, short_tmp, standin_factory, answerer_steps)
    claude, codex = ClaudeDriver(asker), CodexDriver(answerer)

    codex_session = codex.start("starting work")
    claude_session = claude.start("ask ben about the relay port")
    wait_until(lambda: pending_notices(ben) > 0, timeout=PROPAGATION, what="the question at ben's")

    codex.resume(codex_session, "check messages")
    read_question = [r for r in answerer.requests() if r.step == 1]
    assert read_question and read_question[0].contains(QUESTION), answerer.debug()
    assert any(r.step == 0 and r.contains('from="ana"') for r in answerer.requests()), \
        answerer.debug()
    assert any(r.step == 2 for r in answerer.requests()), answerer.debug()  # the answer was sent

    wait_until(lambda: pending_notices(ana) > 0, timeout=PROPAGATION, what="the answer at ana's")
    claude.resume(claude_session, "any answer yet?")
    read_answer = [r for r in asker.requests() if r.step == 3]
    assert read_answer and read_answer[0].contains(ANSWER), asker.debug()
    noticed = [r for r in asker.requests() if r.step == 2]
    assert noticed and noticed[0].contains('from="ben"'), asker.debug()
    assert not noticed[0].contains(ANSWER), asker.debug()
