"""``crosstalk prune``: the command reaches the daemon and answers in CLI.md style."""

from __future__ import annotations

from tests.e2e.conftest import Cli, start_alone


def test_prune_answers_what_it_removed(cli: Cli) -> None:
    """prune reports what it removed, by table, and refuses a negative age as usage."""
    start_alone(cli)  # a home without an identity is not_set_up, with no daemon started
    default = cli.json("prune")
    assert default["older_than_days"] == 30.0
    assert set(default["removed"]) >= {"held_messages", "notices", "attention_record"}
    assert default["total"] == sum(default["removed"].values())
    assert cli.json("prune", "--older-than", "0")["older_than_days"] == 0.0
    refused = cli.json("prune", "--older-than", "-1", expect=2)
    assert refused["error"]["code"] == "usage"
