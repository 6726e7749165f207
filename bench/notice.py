"""send → notice printed by the recipient's hook: the whole path to an agent that pulls.

Used by ``bench.latency`` (same two daemons, same run, next to send → held). The recipient has one
Claude Code session, registered and marked busy the way a real one is (a ``SessionStart`` and a
``UserPromptSubmit`` through the real hook program), so it is mid-turn: every tool call the agent
makes runs the hook as the installers write it into client configs (the installed
``crosstalk-hook`` console script, :func:`crosstalk.install.base.resolve_commands`) with
``--client claude PostToolUse`` and the event on stdin.

Per message: from just before the sender's control-socket ``send`` (intent ``question``, which
the recipient's gate surfaces at once to a busy session at level ``ask``) until a hook process
has exited having printed a notice that names the sender. The hook runs back to back, one
process after another, as an agent calling tools without pause would; so the figure contains:

* send → held at the recipient's daemon (the latency row above it);
* the gate's triage and the notice row (``surfaced_at``, reported separately as send → surfaced);
* the rest of the hook run in flight when the notice surfaced (it may already have asked for
  notices and missed it), then one whole hook run: interpreter start, imports, the control
  socket conversation (register, notices, notice_shown) and the printed answer.

So it is a *pull* figure: a real agent calls tools seconds apart, not back to back, and would
see the notice at its next tool call after send → surfaced; Claude Code sessions with an inbox
socket or a channel get a push instead (``bench.push``). ``hook_runs`` counts processes per message.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

from crosstalk.client import call
from crosstalk.install.base import resolve_commands
from crosstalk.paths import Home
from crosstalk.store.ids import to_db

SESSION = "bench-notice"
#: Seconds a message may take to reach the hook before the benchmark gives up.
NOTICE_TIMEOUT = 30.0


def hook_env(home: Home) -> dict[str, str]:
    """Our environment for the hook, minus anything that would name another session or inbox
    (the benchmark may itself run inside an agent)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE_", "ANTIGRAVITY_"))}
    return {**env, "CROSSTALK_HOME": str(home.root)}


def run_hook(home: Home, event: str, project: Path, *, session: str = SESSION,
             env: dict[str, str] | None = None) -> str:
    """One real hook process for ``event`` of ``session`` (with ``env`` added, as a client
    sets variables for its hooks); its stdout (checked)."""
    stdin = json.dumps({"hook_event_name": event, "session_id": session, "cwd": str(project)})
    done = subprocess.run(
        [*resolve_commands().hook, "--client", "claude", event],
        input=stdin, capture_output=True, text=True, timeout=30,
        env={**hook_env(home), **(env or {})},
    )
    if done.returncode != 0 or not done.stdout.startswith("{"):
        raise RuntimeError(f"hook {event} failed: {done.returncode} {done.stderr[-500:]!r}")
    return done.stdout


def start_busy_session(home: Home, project: Path) -> None:
    """Register :data:`SESSION` (taking its working set) and mark it busy, as a turn starts."""
    run_hook(home, "SessionStart", project)
    run_hook(home, "UserPromptSubmit", project)


def _surfaced_at(db: Path, message_id: str) -> float:
    """When the recipient's gate surfaced the notice for ``message_id`` (its own stamp)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        row = conn.execute(
            "SELECT min(surfaced_at) FROM notices WHERE message_id = ?", (to_db(message_id),)
        ).fetchone()
    finally:
        conn.close()
    if row is None or row[0] is None:
        raise RuntimeError(f"the hook showed {message_id} but no notice row says it surfaced")
    return float(row[0])


def _names_sender(stdout: str, sender: str) -> bool:
    context = json.loads(stdout).get("hookSpecificOutput", {}).get("additionalContext", "")
    return "crosstalk-notice" in context and sender in context


def notice_latency(
    sender: Home, recipient: Home, to: str, sender_label: str, count: int, project: Path
) -> dict[str, list[float]]:
    """Send ``count`` questions one at a time; per message: seconds to the printed notice, to
    the surfaced notice row, the last hook run's own wall time, and hook runs needed."""
    printed: list[float] = []
    surfaced: list[float] = []
    last_run: list[float] = []
    runs: list[float] = []
    for i in range(count):
        start = time.time()
        reply = call(sender, "send", {"to": to, "text": f"notice {i}", "intent": "question"})
        deadline, n = time.monotonic() + NOTICE_TIMEOUT, 0
        while True:
            run_start = time.time()
            stdout = run_hook(recipient, "PostToolUse", project)
            n += 1
            if _names_sender(stdout, sender_label):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no hook showed message {i} within {NOTICE_TIMEOUT} s")
        end = time.time()
        printed.append(end - start)
        last_run.append(end - run_start)
        surfaced.append(_surfaced_at(recipient.database, str(reply["id"])) - start)
        runs.append(float(n))
    return {"printed": printed, "surfaced": surfaced, "last_run": last_run, "runs": runs}
