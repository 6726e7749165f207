"""``crosstalk doctor``'s rows for the coding agents crosstalk is installed into.

One row per client that holds any of our entries (a client we were never installed into gets
no row: not using Goose is not a fault). A row is ✓ when every event we register has our hook,
Codex has been told to trust each of them, the MCP server is registered, and the hook command
runs: its program exists and is executable, and given an empty payload it answers one JSON
object within :data:`HOOK_DEADLINE_S` (an empty payload has no session, so the hook answers
without touching the daemon or registering anything). Reading only; nothing is changed.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable

from crosstalk.doctor.checks import Check
from crosstalk.install import Inspection, Places, inspect_all

HOOK_DEADLINE_S = 5.0

#: Runs a hook command line with stdin text; returns None when it answered one JSON object,
#: else a sentence saying what went wrong.
HookRunner = Callable[[str, str], str | None]


def run_hook(command: str, stdin_text: str) -> str | None:
    """Run ``command`` once (no shell) and say what is wrong with its answer, if anything."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return "its command line does not parse"
    if not argv:
        return "its command line is empty"
    program = shutil.which(argv[0])
    if program is None or not os.access(program, os.X_OK):
        return f"{argv[0]} is not an executable program"
    try:
        done = subprocess.run(
            [program, *argv[1:]],
            input=stdin_text,
            capture_output=True,
            text=True,
            timeout=HOOK_DEADLINE_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"it did not answer within {HOOK_DEADLINE_S:g} s"
    except OSError as exc:
        return f"it could not start ({exc.strerror})"
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        return f"it exited {done.returncode} without a JSON answer"
    if not isinstance(answer, dict):
        return "its answer is not a JSON object"
    return None


def _problems(found: Inspection, runner: HookRunner) -> list[str]:
    """What is wrong with one client's install, each with the command or step that fixes it."""
    fix = f"fix: `crosstalk install {found.client}`"
    problems: list[str] = []
    if found.missing:
        problems.append(f"no crosstalk hook for {', '.join(found.missing)} ({fix})")
    if found.untrusted:
        events = ", ".join(dict.fromkeys(found.untrusted))
        problems.append(
            f"Codex skips these hooks until you trust them: {events} (fix: run `codex`, type "
            "`/hooks` and trust each crosstalk entry)"
        )
    if not found.mcp:
        problems.append(f"the crosstalk MCP server is not registered ({fix})")
    commands = [cmd for cmds in found.hooks.values() for cmd in cmds]
    if commands:
        trouble = runner(commands[0], "{}")
        if trouble is not None:
            problems.append(
                f"the hook does not run: {trouble} ({fix}, which points the hooks at this "
                "crosstalk)"
            )
    return problems


def client_rows(places: Places | None = None, runner: HookRunner = run_hook) -> list[Check]:
    """One row per client crosstalk is installed into (see the module docstring)."""
    rows: list[Check] = []
    for found in inspect_all(places or Places.from_env()):
        if not found.installed:
            continue
        problems = _problems(found, runner)
        if problems:
            rows.append(Check(found.client, False, "; ".join(problems) + "."))
        else:
            events = len(found.expected)
            rows.append(Check(found.client, True, f"{events} hooks, MCP server, hook runs"))
    return rows
