"""Edit awareness with real clients (issue 37, part 2): ana's Claude Code edits a file in her
clone; ben's agent, about to edit the same file in his own clone, is warned before the edit, and
the warning reaches ben's model in the request that follows the tool call.

Both people are in one room (``room`` in conftest); each agent works in its own git clone of the
same repository (same ``origin``, same ``src/app.py``), so the daemons can tell it is one file.
Paths go only to rooms that share the repository, so ben is at work there first (one turn of
his agent, a live session ana's daemon hears of), as two people editing at once are.
The warning's words are the edits feature's (``edits_check``): the test asks ben's daemon for
them directly (a session of its own, the same cwd and path), waits until it has something to
say (ana's edit has reached ben's daemon), and then looks for exactly that text in what ben's
stand-in model receives.

These tests need the daemon's ``edits_touched``/``edits_check`` ops (the edits feature): a
daemon without them fails the bounded wait with a message saying so. Run with the clients
installed::

    CROSSTALK_CLIENTS=$HOME/.cache/crosstalk-clients PYTHONPATH=. \\
        python3 -m pytest -p no:cacheprovider tests/clients/test_edit_awareness.py
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.clients.conftest import (
    CLAUDE,
    CLAUDE_NEW,
    CODEX,
    PROPAGATION,
    Agent,
    Pin,
    agent_for,
)
from tests.clients.test_claude_client import ClaudeDriver
from tests.clients.test_codex_client import CodexDriver
from tests.e2e.conftest import Person, wait_until

ORIGIN = "https://example.invalid/team/app.git"
FILE = "src/app.py"
BEFORE = "VALUE = 1\n"
Room = tuple[Person, Person]


def make_clone(agent: Agent) -> Path:
    """Turn the agent's project folder into a clone of the shared repository; the file's path."""
    project = agent.project
    target = project / FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(BEFORE, encoding="utf-8")
    for argv in (
        ["init", "-q"],
        ["remote", "add", "origin", ORIGIN],
        ["add", FILE],
        ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *argv], cwd=project, check=True, timeout=30,
                       capture_output=True)
    return target


class EditingClaudeDriver(ClaudeDriver):
    """``claude -p`` that may read and edit files without asking (``acceptEdits``)."""

    def _run(self, prompt: str, *session: str) -> dict[str, Any]:
        argv = ["-p", prompt, *session, "--allowedTools", "mcp__crosstalk,Read,Edit",
                "--permission-mode", "acceptEdits", "--output-format", "json"]
        proc = self.checked(self.agent.run(argv))
        result: dict[str, Any] = json.loads(proc.stdout)
        return result


class PatchingCodexDriver(CodexDriver):
    """``codex exec`` that may apply a patch in its folder without asking."""

    def _flags(self) -> list[str]:
        return [*super()._flags(), "--dangerously-bypass-approvals-and-sandbox"]


def claude_edit_steps(path: Path, tag: str) -> list[dict[str, Any]]:
    """Read the file, then Edit it (Claude Code refuses an Edit of a file it has not read)."""
    return [
        {"when": {"user_text_contains": "change the value"},
         "reply": {"tool": "Read", "call_id": f"call_read_{tag}",
                   "arguments": {"file_path": str(path)}}, "times": 1},
        {"when": {"tool_result_for": f"call_read_{tag}"},
         "reply": {"tool": "Edit", "call_id": f"call_edit_{tag}",
                   "arguments": {"file_path": str(path), "old_string": "VALUE = 1",
                                 "new_string": f"VALUE = {tag}"}}, "times": 1},
        {"when": {"tool_result_for": f"call_edit_{tag}"}, "reply": {"text": "changed"}},
    ]  # fmt: skip


def codex_patch_steps(tag: str) -> list[dict[str, Any]]:
    """A patch through the shell, as Codex 0.171.0 offers a model it does not know (measured)."""
    patch = (f"*** Begin Patch\n*** Update File: {FILE}\n@@\n-VALUE = 1\n+VALUE = {tag}\n"
             "*** End Patch\n")
    return [
        {"when": {"user_text_contains": "change the value"},
         "reply": {"tool": "exec_command", "call_id": f"call_patch_{tag}",
                   "arguments": {"cmd": f"apply_patch <<'EOF'\n{patch}EOF\n"}}, "times": 1},
        {"when": {"tool_result_for": f"call_patch_{tag}"}, "reply": {"text": "patched"}},
    ]  # fmt: skip


def warning_at(person: Person, project: Path) -> str | None:
    """What ben's daemon would warn a session of its own about before editing FILE in
    ``project`` (None: nothing yet). Raises when the daemon has no ``edits_check`` op."""
    from crosstalk.client import call
    from crosstalk.errors import CrosstalkError
    from crosstalk.paths import Home

    probe = {"session": f"probe-{uuid.uuid4().hex[:8]}", "cwd": str(project), "paths": [FILE]}
    try:
        reply = call(Home(person.home), "edits_check", probe, timeout=30.0)
    except CrosstalkError as exc:
        if exc.code == "unknown_op":
            pytest.fail("this daemon has no edits_check op: the edits feature is not here yet")
        raise
    text = reply.get("text")
    return text if isinstance(text, str) and text else None


def ana_edits(pin: Pin, room: Room, root: Path, standin_factory: Any) -> None:
    """ana's Claude Code edits FILE in her clone (the edit really happens)."""
    ana, _ = room
    agent = agent_for(pin, ana, root, standin_factory, [])
    path = make_clone(agent)
    agent.standin.stop()  # the script needs the clone's path: start a stand-in that knows it
    agent.standin = standin_factory(f"{pin.prefix}-ana-edit", claude_edit_steps(path, "2"))
    EditingClaudeDriver(agent).start("please change the value")
    assert path.read_text(encoding="utf-8") == "VALUE = 2\n", agent.debug()


def ben_at_work(make_driver: Any, agent: Agent, room: Room, standin_factory: Any) -> None:
    """One turn of ben's agent in his clone: ana's daemon then knows he works in a repository of
    that name (his published session), which is what lets her edits reach the room."""
    from crosstalk.client import call
    from crosstalk.paths import Home

    ana, _ = room
    agent.standin.stop()
    agent.standin = standin_factory(f"{agent.pin.prefix}-ben-hello", [
        {"when": {"user_text_contains": "hello"}, "reply": {"text": "hi"}},
    ])
    make_driver(agent).start("hello")

    def seen() -> bool:
        peers = call(Home(ana.home), "peers", {}, timeout=30.0)["peers"]
        return any(s["project"] == agent.project.name
                   for p in peers for s in p.get("sessions", []))

    wait_until(seen, timeout=PROPAGATION, what="ben's session in the clone known to ana")


def wait_for_warning(ben: Person, project: Path) -> list[str]:
    """Bounded wait until ben's daemon knows of ana's edit; the parts of the warning it then
    gives that do not move with time: its first line, and each line up to the file it names
    (the rest says how long ago, which a later request may say differently)."""
    found: list[str] = []

    def known() -> bool:
        text = warning_at(ben, project)
        if text:
            found.append(text)
        return bool(text)

    wait_until(known, timeout=PROPAGATION,
               what="ana's edit known to ben's daemon (edits_check gives a warning)")
    first, *lines = found[-1].splitlines()
    parts = [first, *(line[: line.index(FILE) + len(FILE)] for line in lines if FILE in line)]
    assert len(parts) > 1 and all("ana's agent" in part for part in parts[1:]), found[-1]
    return parts


def says(request: Any, parts: list[str]) -> bool:
    """Whether a model request carries every part of the warning."""
    return all(request.contains(part) for part in parts)


@pytest.mark.parametrize("pin", [pytest.param(CLAUDE, id="2.1.197"),
                                 pytest.param(CLAUDE_NEW, id="2.1.332")])
def test_claude_code_is_warned_before_editing_a_file_another_claude_code_edited(
    pin: Pin, room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ana's Claude Code edits src/app.py; ben's Claude Code, editing the same file in its own
    clone, gets the daemon's warning in the model request after its Edit."""
    _, ben = room
    agent = agent_for(pin, ben, short_tmp / "b", standin_factory, [])
    path = make_clone(agent)
    ben_at_work(EditingClaudeDriver, agent, room, standin_factory)
    ana_edits(pin, room, short_tmp / "a", standin_factory)
    warning = wait_for_warning(ben, agent.project)
    agent.standin.stop()
    agent.standin = standin_factory(f"{pin.prefix}-ben-edit", claude_edit_steps(path, "3"))
    EditingClaudeDriver(agent).start("please change the value too")
    requests = agent.requests()
    assert [r.step for r in requests][:1] == [0], agent.debug()
    assert not says(requests[0], warning), agent.debug()  # not before the edit was tried
    after_edit = [r for r in requests if r.step == 2]
    assert after_edit and says(after_edit[0], warning), agent.debug()


def test_codex_is_warned_before_patching_a_file_claude_code_edited(
    room: Room, short_tmp: Path, standin_factory: Any
) -> None:
    """ana's Claude Code edits src/app.py; ben's Codex, patching the same file in its own
    clone, gets the daemon's warning in the model request after its patch."""
    _, ben = room
    agent = agent_for(CODEX, ben, short_tmp / "b", standin_factory, [])
    make_clone(agent)
    ben_at_work(PatchingCodexDriver, agent, room, standin_factory)
    ana_edits(CLAUDE, room, short_tmp / "a", standin_factory)
    warning = wait_for_warning(ben, agent.project)
    agent.standin.stop()
    agent.standin = standin_factory("codex-ben-patch", codex_patch_steps("3"))
    PatchingCodexDriver(agent).start("please change the value too")
    requests = agent.requests()
    assert requests and not says(requests[0], warning), agent.debug()
    after_patch = [r for r in requests if r.step == 1]
    assert after_patch and says(after_patch[0], warning), agent.debug()
