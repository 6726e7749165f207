"""The commit guard's pre-commit hook in real git repositories: chaining, byte-exact uninstall.

The hook under test runs a stand-in for crosstalk (``/bin/true`` or ``/bin/false`` as the
recorded command), so these tests are about the hook file and git running it; the check itself
is tested in tests/cli/test_guard_cli.py and tests/e2e/test_guard.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from crosstalk.cli.guard_check import hooks_dir
from crosstalk.errors import NotInRepository
from crosstalk.install.git_hook import (
    HOOK_NAME,
    MARKER,
    SAVED_NAME,
    HookChanged,
    install,
    is_ours,
    uninstall,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

PASS = ("/bin/true",)
FAIL = ("/bin/false",)
GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "ana", "GIT_AUTHOR_EMAIL": "ana@example.org",
    "GIT_COMMITTER_NAME": "ana", "GIT_COMMITTER_EMAIL": "ana@example.org",
}  # fmt: skip


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env=GIT_ENV, check=check, timeout=60)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV, timeout=60)
    return root


def commit(repo: Path, name: str = "f.txt") -> subprocess.CompletedProcess[str]:
    """Stage a new file and try to commit it; the result says whether the hooks let it."""
    (repo / name).write_text(name)
    git(repo, "add", name)
    return git(repo, "commit", "-q", "-m", f"add {name}", check=False)


def head(repo: Path) -> str:
    return git(repo, "rev-parse", "--verify", "-q", "HEAD", check=False).stdout.strip()


def state(directory: Path) -> dict[str, tuple[bytes, int] | str]:
    """Every entry of ``directory``: files as (bytes, mode), symlinks as their target."""
    found: dict[str, tuple[bytes, int] | str] = {}
    for path in sorted(directory.iterdir()):
        if path.is_symlink():
            found[path.name] = f"-> {os.readlink(path)}"
        elif path.is_file():
            found[path.name] = (path.read_bytes(), stat.S_IMODE(path.lstat().st_mode))
    return found


RECORDER = """#!/bin/sh
printf '%s\\n' "ran" "$@" > "$(git rev-parse --show-toplevel)/../ran.txt"
cat >> "$(git rev-parse --show-toplevel)/../ran.txt"
exit "${ORIGINAL_EXIT:-0}"
"""


def write_hook(hooks: Path, text: str | bytes, mode: int = 0o750) -> Path:
    hook = hooks / HOOK_NAME
    hook.write_bytes(text.encode() if isinstance(text, str) else text)
    hook.chmod(mode)
    return hook


def test_install_into_a_repository_without_a_hook_and_back(repo: Path) -> None:
    """No hook: ours is written and run by git; uninstall leaves the directory as it was."""
    hooks = hooks_dir(repo)
    before = state(hooks)
    done = install(hooks, PASS, repo / "home")
    assert (done.hook, done.chained, done.already) == (hooks / HOOK_NAME, None, False)
    assert is_ours(done.hook) and stat.S_IMODE(done.hook.stat().st_mode) == 0o755
    assert commit(repo).returncode == 0 and head(repo)
    assert uninstall(hooks).removed and state(hooks) == before


def test_the_check_failing_refuses_the_commit(repo: Path) -> None:
    """The hook's exit status is the check's: a failing check stops the commit."""
    install(hooks_dir(repo), FAIL, repo / "home")
    assert commit(repo).returncode != 0 and head(repo) == ""


def test_an_existing_hook_runs_first_with_args_and_stdin_and_comes_back_exactly(
    repo: Path,
) -> None:
    """Theirs is kept aside unchanged, runs first (args, stdin), and returns byte for byte."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER, 0o750)
    before = state(hooks)
    done = install(hooks, PASS, repo / "home")
    assert done.chained == hooks / SAVED_NAME
    assert state(hooks)[SAVED_NAME] == before[HOOK_NAME]
    assert commit(repo).returncode == 0
    assert (repo.parent / "ran.txt").read_text() == "ran\n"
    direct = subprocess.run([str(done.hook), "one", "two words"], input=b"from stdin\n",
                            cwd=repo, env=GIT_ENV, check=False, timeout=60)
    assert direct.returncode == 0
    assert (repo.parent / "ran.txt").read_text() == "ran\none\ntwo words\nfrom stdin\n"
    undone = uninstall(hooks)
    assert (undone.hook, undone.removed, undone.restored) == (done.hook, True, True)
    assert state(hooks) == before


def test_a_failing_original_hook_stops_the_commit_before_the_check(repo: Path) -> None:
    """Their hook's failure is the commit's, with its status; the check is not reached."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    install(hooks, PASS, repo / "home")
    (repo / "f.txt").write_text("x")
    git(repo, "add", "f.txt")
    env = {**GIT_ENV, "ORIGINAL_EXIT": "3"}
    run = subprocess.run([str(hooks / HOOK_NAME)], cwd=repo, env=env, check=False, timeout=60)
    assert run.returncode == 3
    failed = subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "x"], env=env,
                            capture_output=True, check=False, timeout=60)
    assert failed.returncode != 0 and head(repo) == ""


def test_the_override_does_not_skip_their_hook(repo: Path) -> None:
    """CROSSTALK_GUARD=off skips only our check: a failing hook of theirs still stops it."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    install(hooks, FAIL, repo / "home")
    (repo / "f.txt").write_text("x")
    git(repo, "add", "f.txt")
    env = {**GIT_ENV, "CROSSTALK_GUARD": "off"}
    ok = subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "x"], env=env,
                        capture_output=True, text=True, check=False, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "off for this commit (CROSSTALK_GUARD=off)" in ok.stderr
    env["ORIGINAL_EXIT"] = "1"
    (repo / "g.txt").write_text("y")
    git(repo, "add", "g.txt")
    refused = subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", "y"], env=env,
                             capture_output=True, check=False, timeout=60)
    assert refused.returncode != 0


def test_a_python_hook_chains(repo: Path) -> None:
    """A hook that is not a shell script (here Python) runs through its own interpreter line."""
    hooks = hooks_dir(repo)
    write_hook(hooks, "#!/usr/bin/env python3\nimport sys\nsys.exit(5)\n", 0o700)
    before = state(hooks)
    install(hooks, PASS, repo / "home")
    assert commit(repo).returncode != 0
    uninstall(hooks)
    assert state(hooks) == before


@pytest.mark.parametrize(("binary", "commits"), [("true", True), ("false", False)])
def test_a_binary_hook_chains_and_comes_back_byte_for_byte(
    repo: Path, binary: str, commits: bool
) -> None:
    """A compiled program as the hook runs first and returns unchanged."""
    program = shutil.which(binary)
    assert program is not None
    hooks = hooks_dir(repo)
    write_hook(hooks, Path(program).read_bytes(), 0o755)
    before = state(hooks)
    install(hooks, PASS, repo / "home")
    assert (commit(repo).returncode == 0) is commits
    uninstall(hooks)
    assert state(hooks) == before


def test_a_symlinked_hook_stays_a_symlink(repo: Path, tmp_path: Path) -> None:
    """A hook that is a symlink (a hook manager's) is moved aside as the link, and put back."""
    target = tmp_path / "managed-hook"
    target.write_text("#!/bin/sh\nexit 4\n")
    target.chmod(0o755)
    hooks = hooks_dir(repo)
    (hooks / HOOK_NAME).symlink_to(target)
    before = state(hooks)
    install(hooks, PASS, repo / "home")
    assert (hooks / SAVED_NAME).is_symlink()
    assert commit(repo).returncode != 0
    uninstall(hooks)
    assert state(hooks) == before and target.read_text() == "#!/bin/sh\nexit 4\n"


def test_a_hook_git_would_ignore_is_ignored_by_ours_too(repo: Path) -> None:
    """Not executable: git skips it, so our hook skips it (and keeps it, mode and all)."""
    hooks = hooks_dir(repo)
    write_hook(hooks, "#!/bin/sh\nexit 1\n", 0o644)
    before = state(hooks)
    install(hooks, PASS, repo / "home")
    assert commit(repo).returncode == 0
    uninstall(hooks)
    assert state(hooks) == before


def test_installing_twice_changes_nothing(repo: Path) -> None:
    """A second install reports ``already`` and leaves both files as they were."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    install(hooks, PASS, repo / "home")
    after_first = state(hooks)
    again = install(hooks, PASS, repo / "home")
    assert again.already and again.chained == hooks / SAVED_NAME
    assert state(hooks) == after_first


def test_installing_again_from_elsewhere_refreshes_the_recorded_command(repo: Path) -> None:
    """crosstalk moved: install again rewrites our hook with the new command, theirs untouched."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    install(hooks, FAIL, repo / "home")
    saved = state(hooks)[SAVED_NAME]
    assert install(hooks, PASS, repo / "home").already
    assert state(hooks)[SAVED_NAME] == saved
    assert commit(repo).returncode == 0


def test_uninstall_without_install_changes_nothing(repo: Path) -> None:
    """Nothing installed (no hook, or only theirs): uninstall says so and touches nothing."""
    hooks = hooks_dir(repo)
    assert not uninstall(hooks).removed
    write_hook(hooks, RECORDER)
    before = state(hooks)
    done = uninstall(hooks)
    assert (done.removed, done.restored) == (False, False) and state(hooks) == before


def test_a_hook_replaced_after_install_is_never_dropped(repo: Path) -> None:
    """Someone put a new hook over ours: install and uninstall refuse, and change nothing."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    install(hooks, PASS, repo / "home")
    write_hook(hooks, "#!/bin/sh\n# their new hook\n")
    before = state(hooks)
    with pytest.raises(HookChanged) as refused:
        uninstall(hooks)
    assert refused.value.code == "hook_changed" and SAVED_NAME in refused.value.message
    with pytest.raises(HookChanged):
        install(hooks, PASS, repo / "home")
    assert state(hooks) == before


def test_a_marker_elsewhere_in_their_hook_does_not_make_it_ours(repo: Path) -> None:
    """Only a marker at the top is ours: a hook quoting it further down stays theirs."""
    hooks = hooks_dir(repo)
    hook = write_hook(hooks, "#!/bin/sh\n# a\n# b\n" + MARKER + "\nexit 0\n")
    assert not is_ours(hook)


def test_an_install_cut_short_is_completed(repo: Path) -> None:
    """Theirs saved, ours missing (an interrupted install): install chains, uninstall restores."""
    hooks = hooks_dir(repo)
    write_hook(hooks, RECORDER)
    before = state(hooks)
    os.rename(hooks / HOOK_NAME, hooks / SAVED_NAME)
    done = install(hooks, PASS, repo / "home")
    assert done.chained == hooks / SAVED_NAME and not done.already
    os.unlink(hooks / HOOK_NAME)  # and someone deleted ours
    restored = uninstall(hooks)
    assert (restored.removed, restored.restored) == (True, True)
    assert state(hooks) == before


def test_core_hooks_path_is_honoured(repo: Path) -> None:
    """With core.hooksPath set (relative to the top), the hook goes there and git runs it."""
    git(repo, "config", "core.hooksPath", "ci/hooks")
    sub = repo / "deep" / "er"
    sub.mkdir(parents=True)
    hooks = hooks_dir(sub)
    assert hooks == repo / "ci" / "hooks"
    install(hooks, FAIL, repo / "home")
    assert (repo / "ci" / "hooks" / HOOK_NAME).is_file()
    assert not (repo / ".git" / "hooks" / HOOK_NAME).exists()
    assert commit(repo).returncode != 0
    assert uninstall(hooks).removed and commit(repo).returncode == 0


def test_a_linked_worktree_uses_the_shared_hooks(repo: Path, tmp_path: Path) -> None:
    """From a linked worktree the hook goes where git looks: the common .git/hooks."""
    assert commit(repo).returncode == 0
    tree = tmp_path / "tree"
    git(repo, "worktree", "add", "-q", str(tree))
    assert hooks_dir(tree) == repo / ".git" / "hooks"
    install(hooks_dir(tree), FAIL, repo / "home")
    assert commit(tree, "g.txt").returncode != 0


def test_outside_a_repository_there_is_no_hooks_directory(tmp_path: Path) -> None:
    """Not in a working tree: not_in_repository."""
    with pytest.raises(NotInRepository) as refused:
        hooks_dir(tmp_path)
    assert refused.value.code == "not_in_repository"
