"""A several-hundred-MB file slice stalls nothing (issue 36 item 4): measured on a real daemon,
`status` answers within a second all through the send, and the send answers within seconds
with the truth, the slice cut to its cap with a marker, and is delivered once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crosstalk.client import call
from crosstalk.paths import Home
from crosstalk.wire.room_ops import MAX_SLICE
from tests.e2e.conftest import Person, pair, wait_for_messages

pytestmark = pytest.mark.e2e

BIG = 400 * 1024 * 1024
STATUS_LIMIT = 1.0  # each status must answer within this, all through the send
SEND_LIMIT = 10.0  # "within a few seconds": a CLI start, a 144 KiB read and a seal


def _send_in_background(ana: Person, project: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "CROSSTALK_RELAY": ana.relay}
    env.pop("CROSSTALK_HOME", None)
    return subprocess.Popen(
        [sys.executable, "-m", "crosstalk", "send", "ben", "x", "--slice", "file:big.bin",
         "--json", "--home", str(ana.home)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=project,
    )


def test_a_400_mb_file_slice_is_cut_to_its_cap_while_status_keeps_answering(
    people: list[Person], short_tmp: Path
) -> None:
    """A sparse 400 MB file as a ``file:`` slice: every `status` asked during the send answers
    within a second; the send answers within seconds with ``truncated: [0]``; ben gets the
    slice cut at the cap, with a marker naming every byte left out, exactly once; ana's link
    never dropped and the loop's worst lag stayed under a second."""
    ana, ben, _ = people
    pair(ana, ben)
    project = short_tmp / "project"
    project.mkdir()
    with (project / "big.bin").open("wb") as big:
        big.truncate(BIG)  # sparse: no disk used, all zeros when read
    home = Home(ana.home)
    waits: list[float] = []
    started = time.monotonic()
    sending = _send_in_background(ana, project)
    try:
        while sending.poll() is None:
            assert time.monotonic() - started < SEND_LIMIT, "the send did not answer in time"
            asked = time.monotonic()
            call(home, "status", timeout=STATUS_LIMIT)  # daemon_unreachable past the limit
            waits.append(time.monotonic() - asked)
        took = time.monotonic() - started
        out, err = sending.communicate(timeout=5)
    finally:
        if sending.poll() is None:
            sending.kill()
            sending.communicate(timeout=5)
    assert sending.returncode == 0, (out, err, ana.log_tail())
    sent = json.loads(out.splitlines()[-1])
    assert sent["truncated"] == [0] and sent["state"] in {"queued", "sent"}
    assert waits and max(waits) < STATUS_LIMIT and took < SEND_LIMIT

    (message,) = wait_for_messages(ben, 1)
    assert message["id"] == sent["id"] and message["slices"][0]["truncated"] is True
    content = ben.json("slice", message["id"], "0")["content"]
    kept = MAX_SLICE - 200
    assert content == "\x00" * kept + f"\n[… cut: {BIG - kept} more bytes not sent]\n"
    assert [row["id"] for row in ana.json("sent")["sent"]] == [sent["id"]]
    status = ana.json("status")
    assert status["relay"]["connected"] is True and status["relay"].get("losses", 0) == 0
    assert status["daemon"]["loop"]["worst_lag_s"] < STATUS_LIMIT
