"""`crosstalk doctor`'s per-client rows."""

from __future__ import annotations

import json
from pathlib import Path

from crosstalk.doctor.clients import client_rows, run_hook
from crosstalk.install import Commands, Places, install


def answers(command: str, stdin_text: str) -> str | None:
    """A hook runner standing in for a hook that answers properly."""
    return None


def broken(command: str, stdin_text: str) -> str | None:
    return "it exited 1 without a JSON answer"


def test_no_rows_for_clients_never_installed(places: Places) -> None:
    """Not using a client is not a fault: an empty HOME gives no rows."""
    assert client_rows(places, answers) == []


def test_a_complete_install_gives_one_good_row(places: Places, commands: Commands) -> None:
    """Hooks for every event, the server registered and a hook that answers: ✓."""
    install("qwen", places, commands)
    rows = client_rows(places, answers)
    assert [(r.name, r.ok) for r in rows] == [("qwen", True)]


def test_codex_row_names_the_hooks_not_yet_trusted(places: Places, commands: Commands) -> None:
    """Codex skips untrusted hooks silently, so doctor says which and how to trust them."""
    install("codex", places, commands)
    (row,) = client_rows(places, answers)
    assert row.name == "codex" and not row.ok
    assert (
        "Codex skips these hooks until you trust them: SessionStart, UserPromptSubmit, "
        "PreToolUse, PostToolUse, Stop (fix: run `codex`, type `/hooks` and trust each "
        "crosstalk entry)"
    ) in row.detail


def test_a_missing_server_or_hook_is_reported_with_the_fix(
    places: Places, commands: Commands
) -> None:
    """Removing our MCP entry and one hook by hand turns the row ✗, naming both and the fix."""
    install("cursor", places, commands)
    mcp = places.home / ".cursor" / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {}}))
    hooks = places.home / ".cursor" / "hooks.json"
    data = json.loads(hooks.read_text())
    del data["hooks"]["stop"]
    hooks.write_text(json.dumps(data))
    (row,) = client_rows(places, answers)
    assert not row.ok
    assert "no crosstalk hook for stop (fix: `crosstalk install cursor`)" in row.detail
    assert (
        "the crosstalk MCP server is not registered (fix: `crosstalk install cursor`)"
    ) in row.detail


def test_a_hook_that_does_not_answer_is_reported(places: Places, commands: Commands) -> None:
    """The runner's complaint ends up in the row, with the install that repoints the hooks."""
    install("gemini", places, commands)
    (row,) = client_rows(places, broken)
    assert not row.ok
    assert row.detail == (
        "the hook does not run: it exited 1 without a JSON answer (fix: `crosstalk install "
        "gemini`, which points the hooks at this crosstalk)."
    )


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def test_run_hook_accepts_a_json_object_answer(tmp_path: Path) -> None:
    """A program that prints one JSON object passes."""
    hook = _script(tmp_path / "good-hook", "cat >/dev/null; printf '{}'")
    assert run_hook(f"{hook} --client claude Stop", "{}") is None


def test_run_hook_explains_a_bad_answer_or_a_missing_program(tmp_path: Path) -> None:
    """Garbage on stdout, a JSON non-object, and a missing program each get their sentence."""
    bad = _script(tmp_path / "bad-hook", "echo hello; exit 3")
    array = _script(tmp_path / "array-hook", "echo '[1]'")
    assert run_hook(str(bad), "{}") == "it exited 3 without a JSON answer"
    assert run_hook(str(array), "{}") == "its answer is not a JSON object"
    missing = tmp_path / "nothing-here"
    assert run_hook(f"{missing} --client x", "{}") == f"{missing} is not an executable program"
