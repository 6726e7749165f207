"""``crosstalk prune``: the command reaches the daemon and answers in CLI.md style."""

from __future__ import annotations

from tests.e2e.conftest import Cli


def test_prune_answers_what_it_removed(cli: Cli) -> None:
    default = cli.json("prune")
    assert default["older_than_days"] == 30.0
    assert set(default["removed"]) >= {"held_messages", "notices", "attention_record"}
    assert default["total"] == sum(default["removed"].values())
    assert cli.json("prune", "--older-than", "0")["older_than_days"] == 0.0
    refused = cli.json("prune", "--older-than", "-1", expect=2)
    assert refused["error"]["code"] == "usage"
