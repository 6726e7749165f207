"""Room memory end to end: real relay, real daemons, the CLI as people use it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crosstalk.client import call
from crosstalk.errors import CrosstalkError
from crosstalk.paths import Home
from crosstalk.store import memory
from tests.e2e.conftest import Person, pair, pid_alive, stop_pid, wait_until
from tests.relay.process import RelayProcess


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
    assert claim == {"id": task["id"], "room": "ben", "outcome": "won", "claimed_by": "ana",
                     "why_pending": None, "provisional": None}
    wait_until(
        lambda: tasks_of(ben)[0]["state"] == "claimed", timeout=30, what="the claim at ben's"
    )
    (seen,) = tasks_of(ben)
    assert seen["claimed_by"] == "ana" and seen["for"] == "ana" and seen["by"] == "ben"


def op(person: Person, name: str, **params: Any) -> dict[str, Any]:
    """One control op straight to the person's daemon (no CLI start-up per call)."""
    return call(Home(person.home), name, params, timeout=60.0)


def memory_rooms(person: Person) -> list[dict[str, Any]]:
    return list(op(person, "memory_state")["rooms"])


def test_concurrent_claims_have_one_winner_on_every_replica(people: list[Person]) -> None:
    """50 races: two homes claim one task at the same instant; one wins, both agree who."""
    ana, ben, _ = people
    pair(ana, ben)
    races = 50
    ids = [op(ana, "task_add", text=f"task {n}")["id"] for n in range(races)]
    wait_until(lambda: len(op(ben, "tasks")["tasks"]) == races, timeout=30, what="tasks at ben's")
    barrier = threading.Barrier(2)
    for task_id in ids:
        answers: dict[str, dict[str, Any]] = {}

        def claim(
            person: Person, task_id: str = task_id, answers: dict[str, Any] = answers
        ) -> None:
            barrier.wait(timeout=30)
            answers[person.home.name] = op(person, "task_claim", id=task_id)

        threads = [threading.Thread(target=claim, args=(p,)) for p in (ana, ben)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        outcomes = sorted(a["outcome"] for a in answers.values())
        assert outcomes == ["lost", "won"], answers
        winner = next(name for name, a in answers.items() if a["outcome"] == "won")
        assert {a["claimed_by"] for a in answers.values()} == {winner}, answers

    def claimers(person: Person) -> dict[str, str]:
        return {t["id"]: t["claimed_by"] for t in op(person, "tasks")["tasks"]}

    wait_until(lambda: claimers(ana) == claimers(ben), timeout=30, what="replicas to agree")
    assert set(claimers(ana)) == set(ids) and None not in claimers(ana).values()
    wait_until(
        lambda: memory_rooms(ana)[0]["state_hash"] == memory_rooms(ben)[0]["state_hash"],
        timeout=30,
        what="equal memory hashes",
    )


@pytest.fixture
def short_memory_people(short_tmp: Path) -> Iterator[tuple[list[Person], RelayProcess]]:
    """Three people on a relay that keeps unacknowledged ops for 2 seconds only."""
    relay = RelayProcess(short_tmp / "relay-data", short_tmp / "relay.stderr", "--retention", "2")
    relay.start()
    url = f"ws://127.0.0.1:{relay.port}"
    crowd = [Person(short_tmp / name, url) for name in ("ana", "ben", "cy")]
    try:
        yield crowd, relay
    finally:
        for person in crowd:
            pid = person.daemon_pid()
            if pid:
                stop_pid(pid)
        relay.kill(signal.SIGTERM)


def relay_backlog(relay: RelayProcess) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{relay.port}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("crosstalk_relay_backlog_ops "))
    return int(float(line.split()[1]))


def test_a_member_away_past_retention_catches_up_by_snapshot(
    short_memory_people: tuple[list[Person], RelayProcess],
) -> None:
    """Ben misses corrections, a forget, new facts and a claim; he gets them from ana's snapshot."""
    (ana, ben, _), relay = short_memory_people
    pair(ana, ben)
    kept = op(ana, "fact_add", text="the API returns camelCase", tags=["api"])["id"]
    gone = op(ana, "fact_add", text="staging is on port 8080")["id"]
    wait_until(lambda: len(op(ben, "facts")["facts"]) == 2, timeout=30, what="facts at ben's")
    stop_pid(ben.daemon_pid() or 0)

    op(ana, "fact_correct", id=kept, text="the API returns snake_case", because="we migrated")
    op(ana, "fact_forget", id=gone)
    new = op(ana, "fact_add", text="uploads retry three times")["id"]
    task = op(ana, "task_add", text="fix the upload path")["id"]
    assert op(ana, "task_claim", id=task)["outcome"] == "won"
    wait_until(lambda: relay_backlog(relay) == 0, timeout=30, what="the relay to drop the ops")

    ben.json("daemon", "start")

    def caught_up() -> bool:
        # Equal hashes were once read while ben still marked a hole: ops parked past a gap after
        # the snapshot are asked for again (memory_log._drain_parked). Caught up is both.
        mine = memory_rooms(ben)[0]
        return mine["state_hash"] == memory_rooms(ana)[0]["state_hash"] and not mine["catching_up"]

    wait_until(caught_up, timeout=45, what="ben's memory to equal ana's, caught up")
    facts = {f["id"]: f for f in op(ben, "facts")["facts"]}
    assert set(facts) == {kept, new}
    assert facts[kept]["text"] == "the API returns snake_case"
    (claimed,) = op(ben, "tasks")["tasks"]
    assert claimed["claimed_by"] == "ana" and claimed["state"] == "claimed"


def test_a_member_whose_link_comes_back_after_the_retention_still_gets_the_op(
    short_memory_people: tuple[list[Person], RelayProcess],
) -> None:
    """Ben's daemon keeps running but is away (frozen) while the relay restarts, ana's claim is
    sequenced and the relay drops it past its retention. Nothing is written after it, so no later
    op shows ben the gap: his link-up must (the relay says where each room's log now starts).
    Seen in CI under load, when ben merely reconnected late."""
    (ana, ben, _), relay = short_memory_people
    pair(ana, ben)
    task = op(ana, "task_add", text="rotate the signing key")["id"]
    wait_until(lambda: len(op(ben, "tasks")["tasks"]) == 1, timeout=30, what="the task at ben's")
    ben_pid = ben.daemon_pid()
    assert ben_pid
    port = relay.port
    relay.kill(signal.SIGKILL)
    os.kill(ben_pid, signal.SIGSTOP)
    back = RelayProcess(relay.data, relay.stderr_path, "--retention", "2", "--port", str(port))
    try:
        back.start()
        wait_until(lambda: op(ana, "status")["relay"]["connected"], timeout=30,
                   what="ana to reconnect")
        assert op(ana, "task_claim", id=task)["outcome"] in ("won", "pending")
        wait_until(lambda: [t["claimed_by"] for t in op(ana, "tasks")["tasks"]] == ["ana"],
                   timeout=30, what="ana's claim to be sequenced")
        wait_until(lambda: relay_backlog(back) == 0, timeout=30, what="the relay to drop it")
        os.kill(ben_pid, signal.SIGCONT)
        try:
            # Under load the relay's 2 s retention can also drop ops ana had not fetched yet, and
            # then both have holes: the one that missed less gives its up after two asking rounds
            # (RETRY_AFTER, 15 s each) before its snapshot reaches ben (seen in a full run).
            wait_until(
                lambda: [t["claimed_by"] for t in op(ben, "tasks")["tasks"]] == ["ana"],
                timeout=120,
                what="the claim to reach ben",
            )
        except (AssertionError, CrosstalkError) as exc:
            # Once seen in a full CI run: ben's socket refused connections after the thaw.
            raise AssertionError(
                f"{exc}; ben's daemon (pid {ben_pid}) alive: {pid_alive(ben_pid)}\n"
                f"{ben.log_tail(60)}"
            ) from exc
    finally:
        os.kill(ben_pid, signal.SIGCONT)
        back.kill(signal.SIGTERM)


def run_in(person: Person, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The person's CLI run from ``cwd`` (the CLI passes its working directory on)."""
    env = {**os.environ, "CROSSTALK_RELAY": person.relay}
    env.pop("CROSSTALK_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "crosstalk", *args, "--home", str(person.home)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        check=False,
    )


def git_repo(path: Path) -> Path:
    """A directory that looks like a git repository root (crosstalk only looks for `.git`)."""
    (path / ".git").mkdir(parents=True)
    return path


def test_decisions_append_in_order_and_survive_concurrent_writers(
    people: list[Person], short_tmp: Path
) -> None:
    """DECISIONS.md gets its heading once, entries in order, and every concurrent entry whole."""
    ana, ben, _ = people
    pair(ana, ben)
    repo = git_repo(short_tmp / "repo")
    first = ana.json(
        "decide", "use snake_case everywhere", "--why", "mobile expects it", "--repo", str(repo)
    )
    assert first["file"] == str(repo / "DECISIONS.md") and first["room"] == "ben"
    op(ana, "decide", text="keep the API versioned", why="", repo=str(repo))
    text = (repo / "DECISIONS.md").read_text()
    assert text.startswith("# Decisions\n\n")
    assert text.index("## use snake_case everywhere") < text.index("## keep the API versioned")
    assert "- Who: ana\n" in text and "- Why: mobile expects it\n" in text

    writers = [
        person.spawn(
            "decide",
            f"decision {n} by {person.home.name}",
            "--why",
            "x" * 300,
            "--repo",
            str(repo),
            "--json",
        )
        for n in range(3)
        for person in (ana, ben)
    ]
    for proc in writers:
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()
    text = (repo / "DECISIONS.md").read_text()
    assert text.count("# Decisions\n") == 1
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert len(headings) == 8
    for n in range(3):
        for name in ("ana", "ben"):
            assert headings.count(f"## decision {n} by {name}") == 1
    entries = text.split("\n## ")[1:]
    assert all(e.count("- Who: ") == 1 and e.count("- When: ") == 1 for e in entries)
    assert text.count("- Why: " + "x" * 300 + "\n") == 6
    wait_until(
        lambda: (
            len(op(ben, "memory_state")["rooms"]) == 1
            and memory_rooms(ben)[0]["state_hash"] == memory_rooms(ana)[0]["state_hash"]
        ),
        timeout=30,
        what="the decisions announced in the room",
    )


def test_working_set_filters_by_repository_and_stays_bounded(
    people: list[Person], short_tmp: Path
) -> None:
    """The working_set op shows this repository's and global facts, capped, and counts the rest;
    asked from a directory inside a repository, it takes the repository's name."""
    ana, ben, _ = people
    pair(ana, ben)
    for n in range(6):  # oldest first: the newest-affirmed facts are shown first
        op(ana, "fact_add", text=f"long api fact {n} " + "y" * 380, tags=["API"])
    op(ana, "fact_add", text="api answers in snake_case", tags=["api"])
    op(ana, "fact_add", text="web is built with vite", tags=["web"])
    op(ana, "fact_add", text="main is protected")
    for n in range(12):
        op(ana, "task_add", text=f"task {n}")
    wait_until(lambda: len(op(ben, "tasks")["tasks"]) == 12, timeout=30, what="tasks at ben's")
    got = op(ben, "working_set", repo="api")
    text = got["text"]
    assert got["repo"] == "api" and got["facts_total"] == 8 and got["tasks_total"] == 12
    assert "api answers in snake_case" in text and "main is protected" in text
    assert "vite" not in text
    facts_block = text[: text.index("</crosstalk-facts>")]
    assert len(facts_block) < 2000 + 400  # the budget plus the tags and preamble
    assert "more not shown; call crosstalk_facts" in text
    assert "2 more not shown; call crosstalk_tasks" in text
    assert "claims" in text.lower()  # presented as claims by named people
    inside = git_repo(short_tmp / "api") / "src"
    inside.mkdir()
    by_cwd = op(ben, "working_set", cwd=str(inside))
    assert (by_cwd["repo"], by_cwd["facts_total"]) == ("api", 8)


def test_project_binding_picks_the_room_and_several_rooms_need_one(
    people: list[Person], short_tmp: Path
) -> None:
    """With two rooms a write must say which; a project's binding or --room decides it."""
    ana, ben, cy = people
    pair(ana, ben)
    cy_room = pair(ana, cy)[0]["room"]
    refused = ana.run("facts", "add", "which room?", "--json")
    assert refused.returncode == 2 and "several rooms" in refused.stdout
    assert "ben" in refused.stdout and "cy" in refused.stdout
    assert ana.json("facts", "add", "for ben only", "--room", "ben")["room"] == "ben"

    repo = git_repo(short_tmp / "work")
    (repo / ".crosstalk").mkdir()
    (repo / ".crosstalk" / "project.json").write_text(json.dumps({"room": cy_room}))
    (repo / "src").mkdir()
    bound = run_in(ana, repo / "src", "facts", "add", "for cy's project", "--json")
    assert bound.returncode == 0, bound.stdout
    assert json.loads(bound.stdout)["room"] == "cy"
    wait_until(lambda: len(op(cy, "facts")["facts"]) == 1, timeout=30, what="the fact at cy's")
    assert [f["text"] for f in op(cy, "facts")["facts"]] == ["for cy's project"]
    assert [f["text"] for f in op(ben, "facts")["facts"]] == ["for ben only"]


def test_facts_from_a_member_with_no_direct_channel_arrive_attributed(
    people: list[Person],
) -> None:
    """Ben and cy share only ana's named room: cy gets ben's facts, from before she joined too."""
    ana, ben, cy = people
    if ana.run("room", "create", "--help").returncode != 0:
        pytest.skip("named rooms (`room create`/`invite`) are not in this tree yet")
    pair(ana, ben)
    pair(ana, cy)
    room = ana.json("room", "create", "team")["room"]
    ana.json("room", "invite", room, "ben")
    ben.json("room", "accept", room)
    early = op(ben, "fact_add", text="deploys go through the staging gate", room=room)
    assert early["outcome"] == "applied"
    ana.json("room", "invite", room, "cy")
    cy.json("room", "accept", room)
    late = op(ben, "fact_add", text="the mobile app pins TLS", room=room)
    assert late["outcome"] == "applied"

    def cy_facts() -> dict[str, dict[str, Any]]:
        return {f["id"]: f for f in op(cy, "facts", room=room)["facts"]}

    wait_until(lambda: len(cy_facts()) == 2, timeout=60, what="both facts at cy's")
    facts = cy_facts()
    assert facts[early["id"]]["by"] == ["ben"] and facts[late["id"]]["by"] == ["ben"]
    assert {f["room"] for f in facts.values()} == {"team"}


def test_a_claim_made_while_the_relay_is_down_is_pending_then_settled(
    short_memory_people: tuple[list[Person], RelayProcess], short_tmp: Path
) -> None:
    """With the relay gone a claim answers `pending`; once it is back the claim holds everywhere."""
    (ana, ben, _), relay = short_memory_people
    pair(ana, ben)
    task = op(ana, "task_add", text="rotate the signing key")["id"]
    wait_until(lambda: len(op(ben, "tasks")["tasks"]) == 1, timeout=30, what="the task at ben's")
    port = relay.port
    relay.kill(signal.SIGKILL)
    wait_until(
        lambda: not op(ana, "status")["relay"]["connected"],
        timeout=30,
        what="ana to notice the relay is gone",
    )
    assert op(ana, "task_claim", id=task) == {
        "ok": True,
        "id": task,
        "room": "ben",
        "outcome": "pending",
        "claimed_by": None,
        "why_pending": "undecided",
        "provisional": None,
    }
    back = RelayProcess(relay.data, relay.stderr_path, "--retention", "2", "--port", str(port))
    back.start()
    try:
        wait_until(
            lambda: [t["claimed_by"] for t in op(ben, "tasks")["tasks"]] == ["ana"],
            timeout=60,
            what="the claim to reach ben",
        )
        assert [t["claimed_by"] for t in op(ana, "tasks")["tasks"]] == ["ana"]

        def reported() -> bool:  # logged by ana's memory sync once it sees the claim applied
            log = (ana.home / "daemon.log").read_text()
            return "our pending claim" in log and "resolved: won" in log

        wait_until(reported, timeout=30, what="ana's daemon to report its pending claim won")
    finally:
        back.kill(signal.SIGTERM)


def _give_memory_up(person: Person, room_id: str) -> None:
    """Leave ``person``'s (stopped) memory of the room as conceding a hole leaves it: it gave
    ops up, and journals from its next seq for a repair."""
    conn = sqlite3.connect(person.home / "state.db")
    try:
        with conn:
            last = memory.cursor(conn, room_id).last_seq
            memory.set_conceded(conn, room_id, True, last + 1)
    finally:
        conn.close()


def test_a_claim_decided_on_a_memory_that_gave_ops_up_is_pending_until_repaired(
    people: list[Person],
) -> None:
    """Ana's memory gave ops up: her claim answers `pending` (memory_incomplete, won for now) in
    --json and in words; once ben's complete memory repairs hers, the same claim is final."""
    ana, ben, _ = people
    pair(ana, ben)
    task = op(ana, "task_add", text="rotate the signing key")["id"]
    wait_until(lambda: len(op(ben, "tasks")["tasks"]) == 1, timeout=30, what="the task at ben's")
    (room,) = memory_rooms(ana)
    stop_pid(ana.daemon_pid() or 0)
    _give_memory_up(ana, room["id"])
    ana.json("daemon", "start")

    claimed = ana.json("tasks", "claim", task)
    assert {k: claimed[k] for k in ("outcome", "why_pending", "provisional", "claimed_by")} == {
        "outcome": "pending", "why_pending": "memory_incomplete", "provisional": "won",
        "claimed_by": "ana",
    }
    said = ana.run("tasks", "claim", task)
    assert said.returncode == 0 and said.stdout.startswith("Not final: won for now"), said

    assert memory_rooms(ana)[0]["incomplete"] is True
    wait_until(  # ana's memory sync asks ben for a repair at its next look
        lambda: memory_rooms(ana)[0]["incomplete"] is False,
        timeout=60,
        what="ben's memory to repair ana's",
    )
    assert memory_rooms(ana)[0]["state_hash"] == memory_rooms(ben)[0]["state_hash"]
    assert ana.json("tasks", "claim", task)["outcome"] == "won"
    assert [t["claimed_by"] for t in op(ben, "tasks")["tasks"]] == ["ana"]
