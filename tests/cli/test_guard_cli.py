"""`crosstalk guard` as people run it: real processes, real git commits, no daemon running.

With a daemon, the refusal itself is end to end in tests/e2e/test_guard.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
    "GIT_COMMITTER_NAME": "ana", "GIT_COMMITTER_EMAIL": "ana@example.org",
}  # fmt: skip
GIT_ENV.pop("CROSSTALK_HOME", None)
GIT_ENV.pop("CROSSTALK_GUARD", None)


def crosstalk(
    cwd: Path, home: Path, *args: str, expect: int = 0, env: dict[str, str] | None = None
) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "crosstalk", *args, "--json", "--home", str(home)],
        cwd=cwd, env={**GIT_ENV, **(env or {})}, capture_output=True, text=True, check=False,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == expect, (done.stdout, done.stderr)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def git(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**GIT_ENV, **(env or {})}, check=False, timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    assert git(tmp_path, "init", "-q", str(root)).returncode == 0
    return root


def stage(repo: Path, name: str) -> None:
    path = repo / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(name)
    assert git(repo, "add", "--", name).returncode == 0


def test_with_no_daemon_the_commit_goes_ahead_with_one_warning(
    repo: Path, tmp_path: Path
) -> None:
    """A home with nothing running: the hook warns on one line, commits, and starts no daemon."""
    home = tmp_path / "nobody"
    installed = crosstalk(repo, home, "guard", "install")
    assert installed == {"hook": str(repo / ".git" / "hooks" / "pre-commit"), "chained": None,
                         "already": False}
    stage(repo, "src/-odd name\n.py")
    done = git(repo, "commit", "-q", "-m", "one")
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("crosstalk guard:")]
    assert len(warnings) == 1 and "could not check reservations" in warnings[0]
    assert "is not running" in warnings[0]
    assert not home.exists()  # nothing started, nothing created


def test_the_override_skips_the_check_with_one_line(repo: Path, tmp_path: Path) -> None:
    """CROSSTALK_GUARD=off commits and says the guard was off."""
    crosstalk(repo, tmp_path / "home", "guard", "install")
    stage(repo, "src/x.py")
    done = git(repo, "commit", "-q", "-m", "one", env={"CROSSTALK_GUARD": "off"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == (
        "crosstalk guard: off for this commit (CROSSTALK_GUARD=off); reservations not checked."
    )


def test_check_reports_its_outcome_in_json(repo: Path, tmp_path: Path) -> None:
    """Nothing staged is clear without asking; staged with no daemon is unchecked; off is
    skipped."""
    home = tmp_path / "home"
    assert crosstalk(repo, home, "guard", "check") == {"outcome": "clear", "message": ""}
    stage(repo, "a.txt")
    unchecked = crosstalk(repo, home, "guard", "check")
    assert unchecked["outcome"] == "unchecked"
    assert unchecked["message"].startswith("crosstalk guard: could not check reservations")
    off = crosstalk(repo, home, "guard", "check", env={"CROSSTALK_GUARD": "off"})
    assert off["outcome"] == "skipped"


def test_install_twice_and_uninstall_twice(repo: Path, tmp_path: Path) -> None:
    """A second install is ``already``; a second uninstall says nothing was installed."""
    home = tmp_path / "home"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(b"#!/bin/sh\nexit 0\n")
    hook.chmod(0o700)
    first = crosstalk(repo, home, "guard", "install")
    assert first["chained"] == str(hook.parent / "pre-commit.crosstalk-original")
    assert crosstalk(repo, home, "guard", "install")["already"] is True
    undone = crosstalk(repo, home, "guard", "uninstall")
    assert undone == {"hook": str(hook), "removed": True, "restored": True}
    assert hook.read_bytes() == b"#!/bin/sh\nexit 0\n" and hook.stat().st_mode & 0o777 == 0o700
    again = crosstalk(repo, home, "guard", "uninstall")
    assert again == {"hook": str(hook), "removed": False, "restored": False}


@pytest.mark.parametrize("command", ["install", "uninstall", "check"])
def test_outside_a_repository_every_guard_command_says_so(tmp_path: Path, command: str) -> None:
    """Run outside git: exit 1, code not_in_repository."""
    outside = tmp_path / "plain"
    outside.mkdir()
    refused = crosstalk(outside, tmp_path / "home", "guard", command, expect=1)
    assert refused["error"]["code"] == "not_in_repository"
