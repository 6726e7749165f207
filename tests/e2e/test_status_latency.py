"""`crosstalk status` shows p50/p99 of send -> posted and of hook requests over the last hour
(issue 38 item 5), measured by a real daemon on a real relay."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.e2e.conftest import Person, pair, wait_until

pytestmark = pytest.mark.e2e

SENDS = 4
HOOKS = 3


def _sane(stat: dict[str, Any], at_least: int) -> None:
    assert stat["count"] >= at_least, stat
    assert 0 < stat["p50_s"] <= stat["p99_s"], stat


def test_status_shows_send_to_posted_and_hook_quantiles(people: list[Person]) -> None:
    """Four sends and three hook events: counts, 0 < p50 <= p99, and a `latency` line."""
    ana, ben, _ = people
    pair(ana, ben)
    before = ana.json("status")["daemon"]["latency"]["send_posted"]["count"]
    for i in range(SENDS):
        ana.json("send", "ben", f"timed {i}")

    def all_posted() -> bool:
        sent = ana.json("sent")["messages"]
        return sum(m["state"] != "queued" for m in sent) >= SENDS

    wait_until(all_posted, timeout=60, what="ana's sends to be posted")
    env = {**os.environ, "CROSSTALK_HOME": str(ana.home), "CROSSTALK_RELAY": ana.relay}
    for _ in range(HOOKS):
        payload = {"hook_event_name": "UserPromptSubmit", "session_id": "s-timed",
                   "cwd": str(ana.home), "prompt": "x"}
        done = subprocess.run(
            [sys.executable, "-m", "crosstalk.hook.main", "--client", "claude",
             "UserPromptSubmit"],
            input=json.dumps(payload), capture_output=True, text=True, timeout=60, env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    latency = ana.json("status")["daemon"]["latency"]
    assert latency["window_s"] == 3600
    _sane(latency["send_posted"], before + SENDS)
    _sane(latency["hook"], HOOKS)
    human = ana.run("status").stdout
    (line,) = [x for x in human.splitlines() if x.startswith("latency")]
    assert "send → posted p50 " in line and "hooks p50 " in line and "(last 60 min)" in line
