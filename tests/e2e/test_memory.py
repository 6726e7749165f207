"""Room memory end to end: real relay, real daemons, the CLI as people use it."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Person, pair, wait_until


def facts_of(person: Person, *args: str) -> list[dict[str, Any]]:
    return list(person.json("facts", *args)["facts"])


def tasks_of(person: Person, *args: str) -> list[dict[str, Any]]:
    return list(person.json("tasks", *args)["tasks"])


def test_a_fact_and_a_task_reach_the_other_side_attributed(people: list[Person]) -> None:
    """A fact added by ana shows at ben's with ana's name; a task claimed is claimed on both."""
    ana, ben, _ = people
    pair(ana, ben)
    added = ana.json("facts", "add", "uploads retry three times", "--in", "api,web")
    assert added["outcome"] == "applied" and added["room"] == "ben"
    wait_until(lambda: len(facts_of(ben)) == 1, timeout=30, what="the fact at ben's")
    (fact,) = facts_of(ben)
    assert fact["text"] == "uploads retry three times"
    assert fact["by"] == ["ana"] and fact["room"] == "ana"
    assert sorted(fact["tags"]) == ["api", "web"] and fact["age_s"] >= 0

    task = ben.json("tasks", "add", "fix the upload path", "--for", "ana")
    wait_until(lambda: len(tasks_of(ana)) == 1, timeout=30, what="the task at ana's")
    claim = ana.json("tasks", "claim", task["id"])
    assert claim == {"id": task["id"], "room": "ben", "outcome": "won", "claimed_by": "ana"}
    wait_until(
        lambda: tasks_of(ben)[0]["state"] == "claimed", timeout=30, what="the claim at ben's"
    )
    (seen,) = tasks_of(ben)
    assert seen["claimed_by"] == "ana" and seen["for"] == "ana" and seen["by"] == "ben"
