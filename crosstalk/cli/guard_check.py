"""The commit guard's shell: asks git and the daemon, hands the answers to the core, and says
where the hook goes.

:mod:`crosstalk.core.guard` decides; this module gathers its inputs. ``git`` names the
repository (``rev-parse --show-toplevel``), its hooks directory (``rev-parse --git-path hooks``,
which follows ``core.hooksPath`` and, in a linked worktree, the shared hooks) and the staged paths
(``diff --cached --name-only --no-renames -z``). Under a hook, git has set ``GIT_INDEX_FILE`` for
``git commit -a`` and ``git commit PATH``; the child ``git`` inherits it and so lists what this
commit will hold.

The daemon is asked, never started: a commit must not wait up to a minute for a daemon to come
up, nor leave one running behind a ``git commit``. A home whose daemon is not running, a home
with no identity, a daemon without the ``reservations`` op, an error or no answer within
:data:`CHECK_TIMEOUT` all give the same outcome: a one-line warning, and the commit goes ahead.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from crosstalk.client import call
from crosstalk.core.guard import (
    OVERRIDE_ENV,
    Outcome,
    Verdict,
    decide,
    guard_disabled,
    parse_reply,
    skipped,
    split_paths,
    unchecked,
)
from crosstalk.errors import CrosstalkError, NotInRepository
from crosstalk.paths import Home

#: Seconds the hook waits for the daemon's answer before committing without the check.
CHECK_TIMEOUT = 3.0
#: Seconds any one git command may take (they read the index and config, nothing more).
GIT_TIMEOUT = 30.0


def _git(cwd: Path, *args: str) -> bytes:
    """Run one git command in ``cwd`` and return its stdout.

    Raises:
        NotInRepository: git is missing, or ``cwd`` is in no repository it will work on.
    """
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NotInRepository(f"Could not run git in {cwd} ({exc}).") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        detail = said[-1] if said else f"git exited with status {done.returncode}"
        if "not a git repository" in detail:
            raise NotInRepository(f"{cwd} is not inside a git repository; run this in one.")
        raise NotInRepository(f"git could not work on {cwd}: {detail.removeprefix('fatal: ')}")
    return done.stdout


def _one_path(output: bytes) -> Path:
    return Path(os.fsdecode(output.rstrip(b"\n")))


def repository_root(cwd: Path) -> Path:
    """The top of the working tree that holds ``cwd``.

    Raises:
        NotInRepository: ``cwd`` is in no git working tree (a bare repository has none).
    """
    return _one_path(_git(cwd, "rev-parse", "--show-toplevel"))


def hooks_dir(cwd: Path) -> Path:
    """Where git looks for this repository's hooks (``core.hooksPath`` honoured), absolute.

    Raises:
        NotInRepository: ``cwd`` is in no git working tree.
    """
    repository_root(cwd)  # a bare repository commits nothing: no guard there
    return _one_path(_git(cwd, "rev-parse", "--path-format=absolute", "--git-path", "hooks"))


def staged_paths(root: Path) -> tuple[str, ...]:
    """Every path the next commit changes: added, modified, deleted, both sides of a rename."""
    return split_paths(_git(root, "diff", "--cached", "--name-only", "--no-renames", "-z"))


def local_time(when: float, *, now: float) -> str:
    """``when`` as local clock time: ``14:05`` today, ``2025-03-02 14:05`` on another day."""
    moment = time.localtime(when)
    same_day = moment[:3] == time.localtime(now)[:3]
    return time.strftime("%H:%M" if same_day else "%Y-%m-%d %H:%M", moment)


def check(home: str | None, cwd: Path, environ: dict[str, str]) -> Verdict:
    """The guard's check for a commit in the repository at ``cwd``.

    Raises:
        NotInRepository: ``cwd`` is in no git working tree.
    """
    if guard_disabled(environ.get(OVERRIDE_ENV)):
        return skipped()
    root = repository_root(cwd)
    staged = staged_paths(root)
    if not staged:
        return Verdict(Outcome.CLEAR)
    resolved = Home.resolve(home)
    try:
        reply = call(resolved, "reservations", {"cwd": str(root)}, timeout=CHECK_TIMEOUT)
        reservations = parse_reply(reply)
    except CrosstalkError as exc:  # unreachable, not set up, unknown op, any error: warn, pass
        return unchecked(_why_unchecked(exc, resolved))
    return decide(
        staged,
        reservations,
        repo=root.name,
        local_time=lambda when: local_time(when, now=reservations.now),
    )


def _why_unchecked(error: CrosstalkError, home: Home) -> str:
    if error.code == "daemon_unreachable" and not home.socket.exists():
        return f"the crosstalk daemon for {home.root} is not running; `crosstalk daemon start`"
    if error.code == "unknown_op":
        return "this crosstalk daemon is older than the guard; `crosstalk daemon restart`"
    return error.message
