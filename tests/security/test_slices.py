"""Slices run git with user text only after validation, and never carry a credential."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from crosstalk.errors import CredentialRefused, InvalidSlice, Refused
from crosstalk.slices.build import build_slice
from crosstalk.wire.room_ops import MAX_SLICE

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "HOME": "/nonexistent",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "app.py").write_text("print('one')\n")
    git(root, "add", "app.py")
    git(root, "commit", "-q", "-m", "one")
    (root / "app.py").write_text("print('two')\n")
    git(root, "commit", "-q", "-am", "two")
    (root / "app.py").write_text("print('three')\n")
    return root


@pytest.mark.parametrize(
    "spec",
    [
        "diff:--output={victim}",
        "diff:HEAD --output={victim}",
        "diff:-o{victim}",
        "diff:--no-index /etc/hostname {victim}",
        "diff:app.py -- --output={victim}",
    ],
)
def test_a_diff_slice_refuses_options_and_leaves_files_alone(
    repo: Path, tmp_path: Path, spec: str
) -> None:
    """``diff:--output=FILE`` is refused (invalid_slice); the file keeps its bytes."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    with pytest.raises(InvalidSlice) as caught:
        build_slice(spec.format(victim=victim), cwd=repo)
    assert caught.value.code == "invalid_slice"
    assert victim.read_text() == "precious\n"


def test_a_diff_slice_takes_revisions_ranges_and_project_paths(repo: Path) -> None:
    """Revisions, ranges and paths inside the project still work."""
    assert "three" in build_slice("diff", cwd=repo).content
    assert "+print('three')" in build_slice("diff:HEAD~1", cwd=repo).content
    ranged = build_slice("diff:HEAD~1..HEAD", cwd=repo).content
    assert "-print('one')" in ranged and "+print('two')" in ranged
    assert "three" in build_slice("diff:HEAD app.py", cwd=repo).content


@pytest.mark.parametrize("spec", ["diff:../..", "diff:/etc", "diff:HEAD /etc/passwd", "diff:nope"])
def test_a_diff_slice_refuses_what_is_neither_a_revision_nor_a_project_path(
    repo: Path, spec: str
) -> None:
    """A word that is not a commit and resolves outside the project is invalid_slice."""
    if spec == "diff:nope":  # a path inside the project that simply has no changes is fine
        assert build_slice(spec, cwd=repo).content == ""
        return
    with pytest.raises(InvalidSlice):
        build_slice(spec, cwd=repo)


def test_a_diff_that_touches_a_credential_file_is_refused(repo: Path) -> None:
    """A diff whose files include .env is credential_refused, and says which file."""
    (repo / ".env").write_text("A=1\n")
    git(repo, "add", ".env")
    with pytest.raises(CredentialRefused, match=r"\.env"):
        build_slice("diff:HEAD", cwd=repo)
    with pytest.raises(CredentialRefused):
        build_slice("diff:HEAD .env", cwd=repo)


def test_a_big_diff_is_cut_at_the_cap_yet_a_credential_file_past_it_still_refuses_it(
    repo: Path,
) -> None:
    """A 2 MB diff is cut at the cap, its marker counting every byte of the diff not sent;
    the same diff that also touches a .env whose part lies far past the cap is refused, as it
    was when the diff was read whole."""
    (repo / "app.py").write_text("print('a line that changed')\n" * 70_000)
    whole = subprocess.run(["git", "-C", str(repo), "diff", "--no-color"], capture_output=True,
                           check=True, env=GIT_ENV).stdout
    assert len(whole) > 2_000_000
    built = build_slice("diff", cwd=repo)
    kept = MAX_SLICE - 200
    assert built.truncated
    assert built.content.endswith(f"\n[… cut: {len(whole) - kept} more bytes not sent]\n")
    assert built.content[:kept].encode() == whole[:kept]
    (repo / "zz").mkdir()
    (repo / "zz" / ".env").write_text("A=1\n")
    git(repo, "add", "zz/.env")
    with pytest.raises(CredentialRefused, match=r"zz/\.env"):
        build_slice("diff:HEAD", cwd=repo)


def test_a_file_outside_the_project_stays_refused(repo: Path) -> None:
    """file: paths that escape the project are refused as before."""
    with pytest.raises(Refused):
        build_slice("file:../../etc/passwd", cwd=repo)


def test_a_project_whose_folder_looks_like_an_option_still_works(tmp_path: Path) -> None:
    """``git -C`` takes the working folder as its value even when it starts with a dash."""
    root = tmp_path / "--output=oops"
    root.mkdir()
    git(root, "init", "-q")
    (root / "a.txt").write_text("x\n")
    git(root, "add", "a.txt")
    assert build_slice("file:a.txt", cwd=root).content == "x\n"
    assert not (tmp_path / "oops").exists()
