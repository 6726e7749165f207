"""Which repository a hook's path is in, and its repo-relative path (real files, no daemon)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crosstalk.features.edits.paths import RepoFile, resolve


@pytest.fixture
def repos(tmp_path: Path) -> Path:
    """``shop`` (a repository bound to room r1), ``lib`` (another), ``loose`` (no repository)."""
    for name in ("shop", "lib"):
        (tmp_path / name / ".git").mkdir(parents=True)
        (tmp_path / name / "src").mkdir()
    (tmp_path / "loose").mkdir()
    (tmp_path / "shop" / ".crosstalk").mkdir()
    (tmp_path / "shop" / ".crosstalk" / "project.json").write_text(json.dumps({"room": "r1"}))
    return tmp_path


def test_absolute_and_relative_paths_become_repo_relative_posix_paths(repos: Path) -> None:
    """Relative to cwd (a subdirectory), absolute, ``..`` inside the repository, a file not
    yet written: each once, in order, with the repository's bound room."""
    shop = repos / "shop"
    found = resolve(str(shop / "src"), ["api.py", str(shop / "README.md"), "../src/./api.py",
                                        "new/dir/file.py"])
    assert found.files == (
        RepoFile("shop", "src/api.py"), RepoFile("shop", "README.md"),
        RepoFile("shop", "src/new/dir/file.py"),
    )
    assert found.bound == {"shop": "r1"}


def test_paths_outside_every_repository_are_dropped(repos: Path) -> None:
    """``..`` out of the repository, a directory with no repository, the root itself, git's own
    files, and a relative path with no cwd name nothing."""
    shop = repos / "shop"
    assert resolve(str(shop), ["../loose/x.py", str(repos / "loose" / "y.py"), str(shop),
                               ".git/config", "/"]).files == ()
    assert resolve(None, ["src/api.py"]).files == ()
    assert resolve("relative/cwd", ["src/api.py"]).files == ()


def test_a_symlink_counts_as_the_file_it_points_to(repos: Path) -> None:
    """A link in shop into lib is lib's file; a link out of every repository is nobody's; a
    symlinked directory resolves through."""
    shop, lib = repos / "shop", repos / "lib"
    (lib / "src" / "util.py").write_text("")
    (shop / "src" / "util.py").symlink_to(lib / "src" / "util.py")
    (shop / "src" / "out.py").symlink_to(repos / "loose" / "out.py")
    (repos / "alias").symlink_to(shop)
    found = resolve(str(shop), ["src/util.py", "src/out.py", str(repos / "alias" / "src" / "a.py")])
    assert found.files == (RepoFile("lib", "src/util.py"), RepoFile("shop", "src/a.py"))
    assert found.bound == {"lib": None, "shop": "r1"}


def test_names_that_look_like_options_and_junk_inputs(repos: Path) -> None:
    """``--force`` and ``-rf`` are files like any other; NUL, empty and over-long inputs are
    dropped without an error; a damaged project.json binds nothing."""
    lib = repos / "lib"
    (lib / ".crosstalk").mkdir()
    (lib / ".crosstalk" / "project.json").write_text("{not json")
    found = resolve(str(lib), ["--force", "-rf", "a\0b", "", "x" * 5000, "src/--help.py"])
    assert found.files == (
        RepoFile("lib", "--force"), RepoFile("lib", "-rf"), RepoFile("lib", "src/--help.py"),
    )
    assert found.bound == {"lib": None}
