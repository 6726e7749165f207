"""What a command prints of the daemon's answer: a lost ``tasks claim`` exits 1 with
``claimed_by_other`` naming the holder, so ``crosstalk tasks claim ID && …`` is safe in a
script (CLI.md), while won and pending exit 0; ``room new`` says who can join before the words.

The daemon here is a fake on the home's control socket (tests/cli/fake_daemon.py); the CLI
runs in-process."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.fake_daemon import run_against
from tests.cli.test_error_walk import Ran, assert_clean_error
from tests.conftest import SHORT_SCRATCH


@pytest.fixture
def home() -> Iterator[Path]:
    """A short home (unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="ct-claim-", dir=SHORT_SCRATCH))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def claim_against(home: Path, outcome: dict[str, Any], *args: str) -> Ran:
    """Run ``tasks claim t1 ARGS --home HOME`` against a daemon answering ``outcome``."""
    reply = {"id": "t1", "room": "team", **outcome}
    return await run_against(home, {"task_claim": [reply]}, ["tasks", "claim", "t1", *args])


async def test_a_lost_claim_exits_1_with_claimed_by_other_naming_the_holder(home: Path) -> None:
    """Lost: exit 1, code claimed_by_other, the sentence names who holds it; human form too."""
    lost = {"outcome": "lost", "claimed_by": "ben"}
    ran = await claim_against(home, lost, "--json")
    assert_clean_error(ran, json_mode=True, code="claimed_by_other")
    assert "ben" in json.loads(ran.out)["error"]["message"]
    human = await claim_against(home, lost)
    assert_clean_error(human, json_mode=False, code="claimed_by_other")
    assert "ben" in human.err


@pytest.mark.parametrize("outcome", ["won", "pending"])
async def test_a_won_or_pending_claim_exits_0(home: Path, outcome: str) -> None:
    """Won and pending print the reply and exit 0."""
    ran = await claim_against(home, {"outcome": outcome, "claimed_by": "ana"}, "--json")
    assert ran.code == 0 and json.loads(ran.out)["outcome"] == outcome


async def test_room_new_prints_who_can_join_before_the_words(home: Path) -> None:
    """The note (only this machine can join) comes before the code: the person reads it out
    at once, and needs to know first whether the other person can join at all."""
    invite = {"invite": "1234-a-b-c-d", "expires_in": 900, "note": "Only this machine can join."}
    joined = {"joined": "ben", "room": "r1", "them": "ben", "you": "ana"}
    ran = await run_against(home, {"room_new": [invite, joined]}, ["room", "new"])
    assert ran.code == 0, ran.err
    assert ran.out.index("Only this machine can join.") < ran.out.index("1234-a-b-c-d")
