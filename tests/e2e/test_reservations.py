"""File reservations end to end (issue 37): a real relay, a daemon per home, the real CLI, and a
git clone of the same repository ("app") per person.

Four people in one room (ana, ben, cy, dan, who paired in a line, so not everyone paired with
everyone) reserve overlapping globs at the same moment, three rounds: exactly one holder each
round, and every replica lists the same holder. Then release, conflicts naming the holder,
renewal, leaving and removal (their reservations lapse everywhere). Waits are bounded polls.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SHORT_SCRATCH
from tests.e2e.conftest import Person, pair, wait_until
from tests.e2e.test_rooms_many import _stop_daemons_under, everyone, join, op, wait_rosters
from tests.relay.process import RelayProcess

pytestmark = pytest.mark.e2e

NAMES = ("ana", "ben", "cy", "dan")
SETTLE = 30.0
ROOM = "work"


class Team:
    def __init__(self, root: Path, relay: str) -> None:
        self.people = {n: Person(root / n, relay) for n in NAMES}
        self.clones = {n: _clone(root / f"{n}-clone" / "app") for n in NAMES}

    def __getitem__(self, name: str) -> Person:
        return self.people[name]

    def cli(self, name: str, *args: str) -> subprocess.CompletedProcess[str]:
        return self.people[name].run(*args, cwd=self.clones[name])

    def json(self, name: str, *args: str) -> dict[str, Any]:
        proc = self.cli(name, *args, "--json")
        assert proc.returncode == 0, (name, args, proc.stdout, proc.stderr)
        return dict(json.loads(proc.stdout.splitlines()[-1]))

    def held(self, name: str) -> list[dict[str, Any]]:
        reply = op(self.people[name], "reservations", room=ROOM)
        return list(reply["reservations"])


def _clone(path: Path) -> Path:
    (path / "src" / "auth").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def team() -> Iterator[Team]:
    root = Path(tempfile.mkdtemp(prefix="ct-", dir=SHORT_SCRATCH))
    relay = RelayProcess(root / "relay-data", root / "relay.stderr")
    relay.start()
    try:
        crew = Team(root, f"ws://127.0.0.1:{relay.port}")
        for a, b in itertools.pairwise(NAMES):
            pair(crew[a], crew[b])
        crew["ben"].json("room", "create", ROOM)
        join(crew["ben"], crew["ana"], ROOM)
        join(crew["ben"], crew["cy"], ROOM)
        join(crew["cy"], crew["dan"], ROOM)
        wait_rosters([crew[n] for n in NAMES], ROOM, everyone(NAMES))
        yield crew
    finally:
        _stop_daemons_under(root)
        relay.kill()
        shutil.rmtree(root, ignore_errors=True)


def _holders(team: Team) -> dict[str, list[tuple[str, str]]]:
    """Per person, the (holder, id) pairs their replica lists."""
    return {n: sorted((r["holder"], r["id"]) for r in team.held(n)) for n in NAMES}


def _wait_agreed(team: Team, want: list[tuple[str, str]]) -> None:
    seen: dict[str, Any] = {}

    def agreed() -> bool:
        seen.update(_holders(team))
        return all(v == want for v in seen.values())

    try:
        wait_until(agreed, timeout=SETTLE, what=f"every replica to list {want}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; replicas: {seen}") from None


GLOBS = ("src/**", "src/auth/*.py", "src/auth/login.py", "**/*.py")


def test_four_reserve_overlapping_globs_at_once_one_holder_each_round(team: Team) -> None:
    rng = random.Random()
    for rnd in range(3):
        order = rng.sample(NAMES, len(NAMES))
        procs = {
            n: team[n].spawn("reserve", GLOBS[i], "--reason", f"round {rnd}", "--room", ROOM,
                             "--json", cwd=team.clones[n])
            for i, n in enumerate(order)
        }
        answers: dict[str, tuple[int, dict[str, Any]]] = {}
        for n, proc in procs.items():
            out, err = proc.communicate(timeout=120)
            answers[n] = (proc.returncode, json.loads((out or err).splitlines()[-1]))
        granted = [n for n, (code, a) in answers.items() if code == 0 and a["state"] == "granted"]
        assert len(granted) == 1, f"round {rnd}: {answers}"
        (winner,) = granted
        for n, (code, a) in answers.items():
            if n != winner:
                assert code == 1 and a["error"]["code"] == "reserved", (rnd, n, a)
                assert winner in a["error"]["message"], (rnd, n, a)
        reservation_id = answers[winner][1]["id"]
        _wait_agreed(team, [(winner, reservation_id)])
        # The winner gives it back; every replica then lists nothing.
        assert team.json(winner, "release", reservation_id)["released"] == [reservation_id]
        _wait_agreed(team, [])


def test_shared_reservations_coexist_and_block_an_exclusive_one(team: Team) -> None:
    a = team.json("ana", "reserve", "docs/**", "--shared", "--reason", "proofreading",
                  "--room", ROOM)
    b = team.json("ben", "reserve", "docs/guide.md", "--shared", "--room", ROOM)
    assert a["state"] == b["state"] == "granted"
    refused = team.cli("cy", "reserve", "docs/guide.md", "--room", ROOM, "--json")
    assert refused.returncode == 1
    error = json.loads(refused.stdout.splitlines()[-1])["error"]
    assert error["code"] == "reserved"
    assert "ana holds docs/** shared" in error["message"] and "proofreading" in error["message"]
    assert team.json("ana", "release")["released"] == [a["id"]]  # all of hers in this repo
    assert team.json("ben", "release", "docs/guide.md")["released"] == [b["id"]]
    _wait_agreed(team, [])


def test_renewal_moves_the_expiry_everywhere(team: Team) -> None:
    got = team.json("dan", "reserve", "src/auth/**", "--for", "5", "--room", ROOM)
    renewed = team.json("dan", "reserve", got["id"], "--renew", "--for", "90")
    assert renewed["state"] == "renewed" and renewed["until"] > got["until"] + 80 * 60
    wait_until(
        lambda: all(
            [r["until"] for r in team.held(n)] == [renewed["until"]] for n in NAMES
        ),
        timeout=SETTLE, what="every replica to hold the renewed expiry",
    )
    someone_else = team.cli("ana", "reserve", got["id"], "--renew", "--json")
    assert someone_else.returncode == 1
    assert json.loads(someone_else.stdout)["error"]["code"] == "unknown_reservation"
    team.json("dan", "release", got["id"])
    _wait_agreed(team, [])


def test_text_that_looks_like_an_option_or_escapes_the_repository_is_refused_plainly(
    team: Team,
) -> None:
    for bad in ("../etc/passwd", "/etc/passwd", "src/[z-a]"):
        proc = team.cli("ana", "reserve", "--room", ROOM, "--json", bad)
        assert proc.returncode == 2, (bad, proc.stdout, proc.stderr)  # usage: CLI.md
        assert json.loads(proc.stdout)["error"]["code"] == "usage", bad
        assert "Traceback" not in proc.stderr
    # (The harness puts --home after every argument, so `-- --force.py` cannot be used here.)
    dashed = team.json("ana", "reserve", "--room", ROOM, "./--force.py")
    assert dashed["paths"] == ["--force.py"]
    team.json("ana", "release", dashed["id"])
    outside = team["ana"].run("reserve", "src/**", "--room", ROOM, "--json",
                              cwd=Path(tempfile.gettempdir()))
    assert outside.returncode == 1
    assert json.loads(outside.stdout)["error"]["code"] == "not_in_repository"
    _wait_agreed(team, [])


def test_an_agent_about_to_edit_a_reserved_file_is_told_and_blocked_when_asked(
    team: Team,
) -> None:
    """ben holds src/auth/** exclusively: ana's hook check before editing src/auth/login.py
    names him, the time left and his reason; with `edits --on-reserved block` it is denied; a
    file outside it says nothing. The reservation travelled the real relay."""
    got = team.json("ben", "reserve", "src/auth/**", "--reason", "rotating the keys",
                    "--room", ROOM)
    wait_until(lambda: [r["id"] for r in team.held("ana")] == [got["id"]], timeout=SETTLE,
               what="ben's reservation at ana's")
    ana = team["ana"]
    clone = str(team.clones["ana"])

    def check(path: str) -> dict[str, Any]:
        reply = op(ana, "edits_check", session="s1", cwd=clone, paths=[path])
        return {k: reply[k] for k in ("text", "decision")}

    told = check("src/auth/login.py")
    assert told["decision"] == "allow", told
    assert "ben" in told["text"] and "rotating the keys" in told["text"], told
    assert check("README.md") == {"text": None, "decision": "allow"}
    try:
        assert team.json("ana", "edits", "--on-reserved", "block")["on_reserved"] == "block"
        assert check("src/auth/login.py")["decision"] == "deny"
    finally:
        team.json("ana", "edits", "--on-reserved", "allow")
    team.json("ben", "release", got["id"])
    _wait_agreed(team, [])
    assert check("src/auth/login.py")["text"] is None


def test_a_member_who_leaves_or_is_removed_holds_nothing_anywhere(team: Team) -> None:
    """A room of its own (the others keep theirs): dan reserves and leaves; cy reserves and ben
    removes cy. Each time every remaining replica lists nothing of theirs."""
    room = "leavers"
    team["ben"].json("room", "create", room)
    join(team["ben"], team["ana"], room)
    join(team["ben"], team["cy"], room)
    join(team["cy"], team["dan"], room)
    wait_rosters([team[n] for n in NAMES], room, everyone(NAMES))

    def listed(name: str) -> list[str]:
        held = op(team[name], "reservations", room=room)["reservations"]
        return sorted(r["holder"] for r in held)

    def wait_lists(names: tuple[str, ...], want: list[str]) -> None:
        wait_until(lambda: all(listed(n) == want for n in names), timeout=SETTLE,
                   what=f"{names} to list {want} in #{room}")

    team.json("dan", "reserve", "docs/**", "--room", room)
    team.json("cy", "reserve", "src/**", "--room", room)
    wait_lists(NAMES, ["cy", "dan"])
    team["dan"].json("room", "leave", room)
    wait_lists(("ana", "ben", "cy"), ["cy"])
    team["ben"].json("room", "kick", room, "cy")
    wait_lists(("ana", "ben"), [])
