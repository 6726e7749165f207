"""Commands that used to fail silently or with a traceback answer one sentence with a code and
the exit status CLI.md gives (issue 36): a decision for a room that does not exist, a mute for
longer than a clock can show."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Cli, start_alone

pytestmark = pytest.mark.e2e


def test_a_decision_for_a_room_that_does_not_exist_is_unknown_room_and_writes_nothing(
    cli: Cli, short_tmp: Path
) -> None:
    """``decide --room nosuch``: exit 1, unknown_room, no DECISIONS.md; no --room still records."""
    start_alone(cli)
    repo = short_tmp / "repo"
    repo.mkdir()
    error = cli.json("decide", "use sqlite", "--room", "nosuch", "--repo", str(repo), expect=1)
    assert error["error"]["code"] == "unknown_room"
    assert "nosuch" in error["error"]["message"]
    assert not (repo / "DECISIONS.md").exists()
    human = cli.run("decide", "use sqlite", "--room", "nosuch", "--repo", str(repo))
    assert human.returncode == 1 and human.stdout == ""
    assert human.stderr.startswith("crosstalk: ") and human.stderr.count("\n") == 1
    recorded = cli.json("decide", "use sqlite", "--repo", str(repo))
    assert recorded["room"] is None and "use sqlite" in (repo / "DECISIONS.md").read_text()


def test_a_decision_for_a_repository_path_past_path_max_is_a_usage_error(cli: Cli) -> None:
    """``decide --repo`` past PATH_MAX: exit 2, one sentence, and no ERROR in daemon.log."""
    start_alone(cli)
    done = cli.run("decide", "use sqlite", "--repo", "/" + "a" * 5000)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "not a directory" in done.stderr
    log = (cli.home / "daemon.log").read_text()
    assert '"level": "ERROR"' not in log and "Traceback" not in log


@pytest.mark.parametrize("minutes", ["1e308", "600000", "inf"])
def test_a_mute_longer_than_a_year_is_a_usage_error_without_a_traceback(
    cli: Cli, minutes: str
) -> None:
    """``mute 1e308`` exits 2 with one sentence, code usage; a mute within a year is taken."""
    start_alone(cli)
    human = cli.run("mute", minutes)
    assert human.returncode == 2, human.stderr
    assert "Traceback" not in human.stderr and human.stderr.count("\n") == 1
    done = cli.run("mute", minutes, "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"]["code"] == "usage"
    assert cli.json("mute", "30")["until"] is not None
