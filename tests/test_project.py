"""Project binding (`.crosstalk/project.json`) and the DECISIONS.md writer."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from crosstalk.errors import InvalidConfig
from crosstalk.project import (
    PROJECT_FILE,
    append_decision_file,
    bind_room,
    bound_room,
    repo_root,
)

WHEN = "2026-11-29T07:45:00+00:00"


@pytest.mark.parametrize(
    "cwd", ["/" + "a" * 5000, "/" + "/".join(["b" * 250] * 40), "/tmp/\x00nul"],
    ids=["a name past NAME_MAX", "a path past PATH_MAX", "a NUL"],
)
def test_a_place_the_os_cannot_look_at_is_in_no_repository(cwd: str) -> None:
    """A cwd a hook or client reports that the OS refuses to stat is no repository (no error)."""
    assert repo_root(cwd) is None


def test_repo_root_is_the_nearest_directory_with_git(tmp_path: Path) -> None:
    """A subdirectory of a repository resolves to the repository root; elsewhere, None."""
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "repo" / "src" / "deep").mkdir(parents=True)
    assert repo_root(tmp_path / "repo" / "src" / "deep") == tmp_path / "repo"
    assert repo_root(tmp_path) is None or repo_root(tmp_path) != tmp_path / "repo"


def test_binding_holds_the_room_id_and_nothing_else(tmp_path: Path) -> None:
    """bind_room writes only {"room": id}; bound_room reads it back; no file means None."""
    assert bound_room(tmp_path) is None
    path = bind_room(tmp_path, "abc123")
    assert json.loads(path.read_text()) == {"room": "abc123"}
    assert bound_room(tmp_path) == "abc123"


@pytest.mark.parametrize(
    "content", ["not json", '{"room": 5}', '["abc"]', '{"room": "../etc"}', '{"key": "abc"}']
)
def test_a_malformed_binding_is_an_invalid_config_naming_the_file(
    tmp_path: Path, content: str
) -> None:
    """Anything but {"room": "<id>"} is refused with invalid_config and the file's path."""
    (tmp_path / PROJECT_FILE).parent.mkdir()
    (tmp_path / PROJECT_FILE).write_text(content)
    with pytest.raises(InvalidConfig) as caught:
        bound_room(tmp_path)
    assert str(tmp_path / PROJECT_FILE) in caught.value.message


def test_decisions_file_gets_a_heading_once_and_entries_in_order(tmp_path: Path) -> None:
    """The first decision creates the heading; later ones append below it, oldest first."""
    append_decision_file(tmp_path, text="first", why="because", who="ana", when_utc=WHEN)
    append_decision_file(tmp_path, text="second", why="", who="ben", when_utc=WHEN)
    text = (tmp_path / "DECISIONS.md").read_text()
    assert text.startswith("# Decisions\n\n") and text.count("# Decisions") == 1
    assert text.index("## first") < text.index("## second")
    assert text.endswith("## second\n\n- Who: ben\n- When: 2026-11-29 07:45 UTC\n")


def test_trailing_whitespace_is_normalised_before_appending(tmp_path: Path) -> None:
    """A hand-edited file ending in blank lines still gets exactly one blank line before."""
    (tmp_path / "DECISIONS.md").write_text("# Decisions\n\nmine\n\n\n\n")
    append_decision_file(tmp_path, text="next", why="", who="ana", when_utc=WHEN)
    assert (tmp_path / "DECISIONS.md").read_text().startswith("# Decisions\n\nmine\n\n## next\n")


def test_concurrent_writers_never_interleave_entries(tmp_path: Path) -> None:
    """Twenty threads appending at once leave twenty whole entries and one heading."""
    barrier = threading.Barrier(20)

    def write(n: int) -> None:
        barrier.wait(timeout=10)
        append_decision_file(tmp_path, text=f"d{n}", why="w" * 2000, who="x", when_utc=WHEN)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    text = (tmp_path / "DECISIONS.md").read_text()
    assert text.count("# Decisions\n") == 1
    assert sorted(line for line in text.splitlines() if line.startswith("## ")) == sorted(
        f"## d{n}" for n in range(20)
    )
    assert text.count("- Why: " + "w" * 2000 + "\n") == 20
