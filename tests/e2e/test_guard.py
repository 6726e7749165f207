"""The commit guard end to end: a real relay, two daemons, real git commits through the hook.

Ben reserves ``src/**`` in his clone of ``app``; ana's commit touching ``src/x.py`` in hers is
refused, naming ben; ``CROSSTALK_GUARD=off`` commits; once ben releases, ana's commit passes
silently; her own and shared reservations never stop her; uninstall puts her hook back exactly.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.e2e.conftest import Person, pair, wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
    "GIT_COMMITTER_NAME": "ana", "GIT_COMMITTER_EMAIL": "ana@example.org",
}  # fmt: skip
GIT_ENV.pop("CROSSTALK_HOME", None)  # the hook checks as the home it was installed with
GIT_ENV.pop("CROSSTALK_GUARD", None)
THEIR_HOOK = b"#!/bin/sh\necho their-hook-ran >&2\n"


def git(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**GIT_ENV, **env}, check=False, timeout=120)


def clone_named_app(where: Path) -> Path:
    """A repository called ``app`` (reservations are per repository name) with one commit."""
    repo = where / "app"
    repo.mkdir(parents=True)
    assert git(repo, "init", "-q").returncode == 0
    (repo / "README.md").write_text("app\n")
    assert git(repo, "add", "README.md").returncode == 0
    assert git(repo, "commit", "-q", "-m", "start").returncode == 0
    return repo


def commit(repo: Path, name: str, **env: str) -> subprocess.CompletedProcess[str]:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{name} {path.stat().st_size if path.exists() else 0}\n")
    assert git(repo, "add", "--", name).returncode == 0
    return git(repo, "commit", "-q", "-m", f"change {name}", **env)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").stdout.strip()


def guard_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "crosstalk" in line]


def holders_seen(person: Person) -> list[str]:
    return sorted(r["holder"] for r in person.json("reservations")["reservations"])


def test_a_commit_touching_someone_elses_reservation_is_refused(
    people: list[Person], short_tmp: Path
) -> None:
    """Refused naming ben; the override commits; after his release it passes; uninstall exact."""
    ana, ben, _ = people
    pair(ana, ben)
    ana_repo = clone_named_app(short_tmp / "ana-work")
    ben_repo = clone_named_app(short_tmp / "ben-work")
    hook = ana_repo / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(THEIR_HOOK)
    hook.chmod(0o750)

    installed = ana.json("guard", "install", cwd=ana_repo)
    assert installed["hook"] == str(hook)

    held = ben.json("reserve", "src/**", "--reason", "moving auth", cwd=ben_repo)
    assert held["paths"] == ["src/**"] and held["shared"] is False
    wait_until(lambda: holders_seen(ana) == ["ben"], timeout=30, what="ben's reservation at ana's")

    before = head(ana_repo)
    refused = commit(ana_repo, "src/x.py")
    assert refused.returncode != 0 and head(ana_repo) == before
    assert "their-hook-ran" in refused.stderr  # her own hook still ran first
    message = refused.stderr
    assert "ben holds src/**" in message and "moving auth" in message
    assert "min left" in message and "src/x.py" in message
    assert "CROSSTALK_GUARD=off git commit" in message

    forced = git(ana_repo, "commit", "-q", "-m", "anyway", CROSSTALK_GUARD="off")
    assert forced.returncode == 0, forced.stderr
    assert head(ana_repo) != before
    assert guard_lines(forced.stderr) == [
        "crosstalk guard: off for this commit (CROSSTALK_GUARD=off); reservations not checked."
    ]

    outside = commit(ana_repo, "docs/guide.md")  # not under src/: nobody's
    assert outside.returncode == 0, outside.stderr
    assert guard_lines(outside.stderr) == []

    assert ben.json("release", cwd=ben_repo)["released"] == [held["id"]]
    wait_until(lambda: holders_seen(ana) == [], timeout=30, what="the release at ana's")
    passed = commit(ana_repo, "src/y.py")
    assert passed.returncode == 0, passed.stderr
    assert guard_lines(passed.stderr) == []

    undone = ana.json("guard", "uninstall", cwd=ana_repo)
    assert undone == {"hook": str(hook), "removed": True, "restored": True}
    assert hook.read_bytes() == THEIR_HOOK and stat.S_IMODE(hook.stat().st_mode) == 0o750
    assert not (hook.parent / "pre-commit.crosstalk-original").exists()


def test_ones_own_and_shared_reservations_never_stop_a_commit(
    people: list[Person], short_tmp: Path
) -> None:
    """Ana's own exclusive reservation and ben's shared one let her commit, silently."""
    ana, ben, _ = people
    pair(ana, ben)
    ana_repo = clone_named_app(short_tmp / "ana-work")
    ben_repo = clone_named_app(short_tmp / "ben-work")
    ana.json("guard", "install", cwd=ana_repo)
    ana.json("reserve", "src/**", cwd=ana_repo)
    ben.json("reserve", "lib/**", "--shared", cwd=ben_repo)
    wait_until(lambda: holders_seen(ana) == ["ana", "ben"], timeout=30, what="both reservations")
    for name in ("src/mine.py", "lib/shared.py"):
        done = commit(ana_repo, name)
        assert done.returncode == 0, done.stderr
        assert guard_lines(done.stderr) == []
